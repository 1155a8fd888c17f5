"""A small Excel formula evaluator for the verifier (openpyxl stores formulas, it does not compute
them).

``Evaluator(workbook, overrides)`` computes any cell of an openpyxl workbook loaded with
``data_only=False``: a constant is read as it is, a formula (``=...``) is parsed with openpyxl's
tokenizer and evaluated, recursively through the cells it refers to. ``overrides`` maps
``(sheet title, "A1")`` to a value used instead of the cell's own: the verifier uses it to put the
pristine inputs, or perturbed ones, under the agent's formulas, so that a formula that is a
constant in disguise (``=1234.5``) is caught.

Supported: numbers, strings, booleans, cell and range references (``A1``, ``$A$1``, ``A1:B9``,
``A:A``, ``Sheet!A1``, ``'Sheet name'!A1:B2``), the operators ``+ - * / ^ & = <> < > <= >=``,
unary minus and ``%``, and the functions in ``FUNCTIONS``. Anything else raises
``FormulaError`` (the verifier then fails the cell).
"""

from __future__ import annotations

import datetime
import math
import re
from decimal import ROUND_DOWN, ROUND_HALF_UP, ROUND_UP, Decimal

from openpyxl.formula import Tokenizer
from openpyxl.formula.tokenizer import Token
from openpyxl.utils import column_index_from_string, get_column_letter
from openpyxl.utils.datetime import to_excel
from openpyxl.worksheet.formula import ArrayFormula


class FormulaError(Exception):
    pass


class XlError(str):
    """An Excel error value (#DIV/0!, #VALUE!, #N/A...)."""


DIV0, VALUE, NA, REF = XlError("#DIV/0!"), XlError("#VALUE!"), XlError("#N/A"), XlError("#REF!")

REF_RE = re.compile(
    r"^(?:(?P<sheet>'(?:[^']|'')+'|[^'!:]+)!)?"
    r"(?P<c1>\$?[A-Za-z]{1,3})?(?P<r1>\$?\d+)?(?::(?P<c2>\$?[A-Za-z]{1,3})?(?P<r2>\$?\d+)?)?$"
)


class Range:
    def __init__(self, sheet, min_col, min_row, max_col, max_row):
        self.sheet, self.min_col, self.min_row = sheet, min_col, min_row
        self.max_col, self.max_row = max_col, max_row

    @property
    def shape(self):
        return self.max_row - self.min_row + 1, self.max_col - self.min_col + 1

    def cells(self):
        for r in range(self.min_row, self.max_row + 1):
            for c in range(self.min_col, self.max_col + 1):
                yield r, c


def is_formula(value) -> bool:
    if isinstance(value, ArrayFormula):
        return True
    return isinstance(value, str) and value.startswith("=") and len(value) > 1


def formula_text(value) -> str:
    if isinstance(value, ArrayFormula):
        return value.text if value.text.startswith("=") else "=" + value.text
    return value


class Evaluator:
    def __init__(self, workbook, overrides=None, max_depth=2000):
        self.wb = workbook
        self.overrides = {(s.lower(), c.upper()): v for (s, c), v in (overrides or {}).items()}
        self.cache = {}
        self.active = set()
        self.steps = 0

    # --- cells ------------------------------------------------------------------------------
    def sheet(self, name):
        for ws in self.wb.worksheets:
            if ws.title.lower() == name.lower():
                return ws
        raise FormulaError(f"no sheet {name!r}")

    def cell(self, sheet_name, coord):
        return self._cell(self.sheet(sheet_name).title, coord.upper().replace("$", ""))

    def _cell(self, title, coord):
        key = (title.lower(), coord)
        if key in self.overrides:
            return self.overrides[key]
        if key in self.cache:
            return self.cache[key]
        if key in self.active:
            raise FormulaError(f"circular reference at {title}!{coord}")
        value = self.sheet(title)[coord].value
        if is_formula(value):
            self.active.add(key)
            try:
                value = self.formula(title, formula_text(value))
            finally:
                self.active.discard(key)
        elif isinstance(value, (datetime.datetime, datetime.date)):
            value = to_excel(value)
        self.cache[key] = value
        return value

    def formula(self, sheet_title, text):
        tokens = [t for t in Tokenizer(text).items if t.type != Token.WSPACE]
        parser = _Parser(tokens, self, sheet_title)
        value = parser.expression()
        if parser.pos != len(tokens):
            raise FormulaError(f"cannot parse {text!r}")
        if isinstance(value, (Range, list)):
            value = self.scalar(value)
        return value

    # --- values -----------------------------------------------------------------------------
    def ref(self, text, sheet_title):
        m = REF_RE.match(text)
        if not m or not (m.group("c1") or m.group("r1")):
            raise FormulaError(f"unsupported reference {text!r}")
        sheet = m.group("sheet")
        if sheet:
            sheet = sheet[1:-1].replace("''", "'") if sheet.startswith("'") else sheet
            title = self.sheet(sheet).title
        else:
            title = sheet_title
        ws = self.sheet(title)

        def col(c, default):
            return column_index_from_string(c.replace("$", "").upper()) if c else default

        def row(r, default):
            return int(r.replace("$", "")) if r else default

        c1, r1 = col(m.group("c1"), 1), row(m.group("r1"), 1)
        if ":" in text:
            c2 = col(m.group("c2"), ws.max_column)
            r2 = row(m.group("r2"), ws.max_row)
            if not m.group("r1"):  # A:A
                r1, r2 = 1, ws.max_row
            if not m.group("c1"):  # 1:1
                c1, c2 = 1, ws.max_column
        else:
            if not (m.group("c1") and m.group("r1")):
                raise FormulaError(f"unsupported reference {text!r}")
            c2, r2 = c1, r1
        return Range(title, min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2))

    def range_values(self, rng):
        return [
            [
                self._cell(rng.sheet, f"{get_column_letter(c)}{r}")
                for c in range(rng.min_col, rng.max_col + 1)
            ]
            for r in range(rng.min_row, rng.max_row + 1)
        ]

    def scalar(self, value):
        if isinstance(value, Range):
            if value.shape != (1, 1):
                return VALUE
            return self._cell(value.sheet, f"{get_column_letter(value.min_col)}{value.min_row}")
        if isinstance(value, list):
            return value[0][0] if len(value) == 1 and len(value[0]) == 1 else VALUE
        return value

    def flat(self, value):
        """Values of an argument for SUM-like functions: (value, came_from_range)."""
        if isinstance(value, Range):
            return [(v, True) for row in self.range_values(value) for v in row]
        if isinstance(value, list):
            return [(v, True) for row in value for v in row]
        return [(value, False)]


def to_num(v):
    if isinstance(v, XlError):
        raise _Err(v)
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise _Err(VALUE) from None
    raise _Err(VALUE)


def to_text(v):
    if isinstance(v, XlError):
        raise _Err(v)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def to_bool(v):
    if isinstance(v, XlError):
        raise _Err(v)
    if isinstance(v, str):
        if v.upper() in ("TRUE", "FALSE"):
            return v.upper() == "TRUE"
        raise _Err(VALUE)
    return bool(to_num(v))


class _Err(Exception):
    def __init__(self, err):
        super().__init__(err)
        self.err = err


def _rank(v):
    if v is None:
        return 0
    if isinstance(v, bool):
        return 3
    if isinstance(v, (int, float)):
        return 1
    return 2


def compare(a, b, op):
    for v in (a, b):
        if isinstance(v, XlError):
            raise _Err(v)
    if a is None:
        a = "" if isinstance(b, str) else (False if isinstance(b, bool) else 0)
    if b is None:
        b = "" if isinstance(a, str) else (False if isinstance(a, bool) else 0)
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        ka, kb = ra, rb
    elif isinstance(a, str):
        ka, kb = a.lower(), b.lower()
    else:
        ka, kb = a, b
    return {
        "=": ka == kb,
        "<>": ka != kb,
        "<": ka < kb,
        ">": ka > kb,
        "<=": ka <= kb,
        ">=": ka >= kb,
    }[op]


def excel_round(x, digits, mode=ROUND_HALF_UP):
    q = Decimal(1).scaleb(-int(digits))
    return float(Decimal(repr(float(x))).quantize(q, rounding=mode))


def criterion(crit):
    """A predicate for SUMIF/COUNTIF-style criteria."""
    op, operand = "=", crit
    if isinstance(crit, str):
        m = re.match(r"^(<=|>=|<>|<|>|=)?(.*)$", crit, re.S)
        op, operand = m.group(1) or "=", m.group(2)
        try:
            operand = float(operand)
        except ValueError:
            pass
    if isinstance(operand, str):
        if op in ("=", "<>") and any(ch in operand for ch in "*?"):
            pattern = re.compile(
                "^"
                + "".join(
                    ".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in operand
                )
                + "$",
                re.I | re.S,
            )

            def match(v):
                hit = isinstance(v, str) and bool(pattern.match(v))
                return hit if op == "=" else not hit

            return match
        if operand == "":
            return (
                (lambda v: v is None or v == "")
                if op == "="
                else (lambda v: not (v is None or v == ""))
            )

        def match(v):
            if not isinstance(v, str):
                return op == "<>"
            return compare(v, operand, op)

        return match

    def match(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return op == "<>"
        return compare(v, operand, op)

    return match


class _Parser:
    def __init__(self, tokens, ev, sheet_title):
        self.t, self.pos, self.ev, self.sheet = tokens, 0, ev, sheet_title

    def peek(self):
        return self.t[self.pos] if self.pos < len(self.t) else None

    def take(self):
        tok = self.peek()
        if tok is None:
            raise FormulaError("unexpected end of formula")
        self.pos += 1
        return tok

    def _infix(self, ops):
        tok = self.peek()
        return tok is not None and tok.type == Token.OP_IN and tok.value in ops

    def expression(self):
        left = self.concat()
        while self._infix({"=", "<>", "<", ">", "<=", ">="}):
            op = self.take().value
            right = self.concat()
            left = self._apply(lambda a, b, op=op: compare(a, b, op), left, right)
        return left

    def concat(self):
        left = self.additive()
        while self._infix({"&"}):
            self.take()
            right = self.additive()
            left = self._apply(lambda a, b: to_text(a) + to_text(b), left, right)
        return left

    def additive(self):
        left = self.term()
        while self._infix({"+", "-"}):
            op = self.take().value
            right = self.term()
            left = self._apply(
                (lambda a, b: to_num(a) + to_num(b))
                if op == "+"
                else (lambda a, b: to_num(a) - to_num(b)),
                left,
                right,
            )
        return left

    def term(self):
        left = self.power()
        while self._infix({"*", "/"}):
            op = self.take().value
            right = self.power()
            if op == "*":
                left = self._apply(lambda a, b: to_num(a) * to_num(b), left, right)
            else:

                def div(a, b):
                    d = to_num(b)
                    if d == 0:
                        raise _Err(DIV0)
                    return to_num(a) / d

                left = self._apply(div, left, right)
        return left

    def power(self):
        left = self.unary()
        while self._infix({"^"}):
            self.take()
            right = self.unary()
            left = self._apply(lambda a, b: float(to_num(a)) ** to_num(b), left, right)
        return left

    def unary(self):
        tok = self.peek()
        if tok is not None and tok.type == Token.OP_PRE:
            self.take()
            value = self.unary()
            if tok.value == "-":
                return self._apply1(lambda a: -to_num(a), value)
            return self._apply1(to_num, value)
        return self.postfix()

    def postfix(self):
        value = self.primary()
        while (tok := self.peek()) is not None and tok.type == Token.OP_POST:
            self.take()
            value = self._apply1(lambda a: to_num(a) / 100, value)
        return value

    def primary(self):
        tok = self.take()
        if tok.type == Token.OPERAND:
            if tok.subtype == Token.NUMBER:
                return float(tok.value) if any(ch in tok.value for ch in ".eE") else int(tok.value)
            if tok.subtype == Token.TEXT:
                return tok.value[1:-1].replace('""', '"')
            if tok.subtype == Token.LOGICAL:
                return tok.value.upper() == "TRUE"
            if tok.subtype == Token.ERROR:
                return XlError(tok.value)
            if tok.subtype == Token.RANGE:
                return self.ev.ref(tok.value, self.sheet)
        if tok.type == Token.PAREN and tok.subtype == Token.OPEN:
            value = self.expression()
            close = self.take()
            if not (close.type == Token.PAREN and close.subtype == Token.CLOSE):
                raise FormulaError("missing )")
            return value
        if tok.type == Token.FUNC and tok.subtype == Token.OPEN:
            name = tok.value[:-1].upper()
            for prefix in ("_XLFN.", "_XLWS."):
                if name.startswith(prefix):
                    name = name[len(prefix) :]
            args = []
            nxt = self.peek()
            if nxt is not None and nxt.type == Token.FUNC and nxt.subtype == Token.CLOSE:
                self.take()
            else:
                while True:
                    nxt = self.peek()
                    if nxt is not None and nxt.type == Token.SEP and nxt.subtype == Token.ARG:
                        args.append(None)  # an empty argument
                    else:
                        args.append(self.expression())
                    sep = self.take()
                    if sep.type == Token.FUNC and sep.subtype == Token.CLOSE:
                        break
                    if not (sep.type == Token.SEP and sep.subtype == Token.ARG):
                        raise FormulaError(f"unexpected {sep.value!r} in {name}()")
            fn = FUNCTIONS.get(name)
            if fn is None:
                raise FormulaError(f"function {name} is not supported by the grader")
            try:
                return fn(self.ev, *args)
            except _Err as exc:
                return exc.err
            except TypeError as exc:
                raise FormulaError(f"{name}: wrong number of arguments") from exc
        raise FormulaError(f"unexpected token {tok.value!r}")

    def _grid_or_scalar(self, v):
        if isinstance(v, Range):
            return self.ev.range_values(v) if v.shape != (1, 1) else self.ev.scalar(v)
        if isinstance(v, list) and len(v) == 1 and len(v[0]) == 1:
            return v[0][0]
        return v

    @staticmethod
    def _one(fn, *args):
        try:
            return fn(*args)
        except _Err as exc:
            return exc.err

    def _apply(self, fn, a, b):
        """A binary operator; over arrays (ranges) it works element by element, as in
        SUMPRODUCT((A2:A9="x")*B2:B9)."""
        a, b = self._grid_or_scalar(a), self._grid_or_scalar(b)
        if not isinstance(a, list) and not isinstance(b, list):
            return self._one(fn, a, b)
        ga = a if isinstance(a, list) else None
        gb = b if isinstance(b, list) else None
        rows = len(ga or gb)
        cols = len((ga or gb)[0])
        if ga is not None and gb is not None and (len(ga), len(ga[0])) != (len(gb), len(gb[0])):
            return VALUE
        return [
            [
                self._one(fn, ga[i][j] if ga is not None else a, gb[i][j] if gb is not None else b)
                for j in range(cols)
            ]
            for i in range(rows)
        ]

    def _apply1(self, fn, a):
        a = self._grid_or_scalar(a)
        if isinstance(a, list):
            return [[self._one(fn, x) for x in row] for row in a]
        return self._one(fn, a)


# --- functions ------------------------------------------------------------------------------


def _numbers(ev, args):
    out = []
    for arg in args:
        for v, from_range in ev.flat(arg):
            if isinstance(v, XlError):
                raise _Err(v)
            if from_range:
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.append(v)
            elif v is not None:
                out.append(to_num(v))
    return out


def f_sum(ev, *args):
    return sum(_numbers(ev, args))


def f_average(ev, *args):
    nums = _numbers(ev, args)
    if not nums:
        raise _Err(DIV0)
    return sum(nums) / len(nums)


def f_min(ev, *args):
    nums = _numbers(ev, args)
    return min(nums) if nums else 0


def f_max(ev, *args):
    nums = _numbers(ev, args)
    return max(nums) if nums else 0


def f_median(ev, *args):
    nums = sorted(_numbers(ev, args))
    if not nums:
        raise _Err(NA)
    mid = len(nums) // 2
    return nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2


def f_count(ev, *args):
    return sum(
        1
        for arg in args
        for v, _ in ev.flat(arg)
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    )


def f_counta(ev, *args):
    return sum(1 for arg in args for v, _ in ev.flat(arg) if v is not None and v != "")


def f_countblank(ev, rng):
    return sum(1 for v, _ in ev.flat(rng) if v is None or v == "")


def f_round(ev, x, digits=0):
    return excel_round(to_num(ev.scalar(x)), to_num(ev.scalar(digits)))


def f_roundup(ev, x, digits=0):
    v = to_num(ev.scalar(x))
    return excel_round(v, to_num(ev.scalar(digits)), ROUND_UP)


def f_rounddown(ev, x, digits=0):
    return excel_round(to_num(ev.scalar(x)), to_num(ev.scalar(digits)), ROUND_DOWN)


def f_abs(ev, x):
    return abs(to_num(ev.scalar(x)))


def f_int(ev, x):
    return math.floor(to_num(ev.scalar(x)))


def f_mod(ev, a, b):
    d = to_num(ev.scalar(b))
    if d == 0:
        raise _Err(DIV0)
    return to_num(ev.scalar(a)) % d


def f_if(ev, cond, yes=True, no=False):
    c = ev.scalar(cond)
    if isinstance(c, XlError):
        return c
    return ev.scalar(yes) if to_bool(c) else ev.scalar(no)


def f_ifs(ev, *args):
    for i in range(0, len(args) - 1, 2):
        if to_bool(ev.scalar(args[i])):
            return ev.scalar(args[i + 1])
    raise _Err(NA)


def f_iferror(ev, value, fallback):
    v = ev.scalar(value)
    return ev.scalar(fallback) if isinstance(v, XlError) else v


def f_and(ev, *args):
    return all(to_bool(v) for arg in args for v, _ in ev.flat(arg) if v is not None)


def f_or(ev, *args):
    return any(to_bool(v) for arg in args for v, _ in ev.flat(arg) if v is not None)


def f_not(ev, x):
    return not to_bool(ev.scalar(x))


def _grid(ev, rng):
    if isinstance(rng, Range):
        return ev.range_values(rng)
    if isinstance(rng, list):
        return rng
    raise _Err(VALUE)


def _sized(rng, like):
    """Excel's SUMIF: the sum range takes the criteria range's shape from its top-left cell."""
    rows, cols = like.shape
    return Range(
        rng.sheet, rng.min_col, rng.min_row, rng.min_col + cols - 1, rng.min_row + rows - 1
    )


def _matches(ev, pairs):
    masks = []
    shape = None
    for rng, crit in pairs:
        if not isinstance(rng, Range):
            raise _Err(VALUE)
        if shape is None:
            shape = rng.shape
        elif rng.shape != shape:
            raise _Err(VALUE)
        pred = criterion(ev.scalar(crit))
        masks.append([pred(v) for row in ev.range_values(rng) for v in row])
    return [all(m[i] for m in masks) for i in range(len(masks[0]))], shape


def f_sumif(ev, rng, crit, sum_range=None):
    mask, _ = _matches(ev, [(rng, crit)])
    values = [
        v
        for row in _grid(ev, _sized(sum_range, rng) if sum_range is not None else rng)
        for v in row
    ]
    return sum(
        v
        for v, m in zip(values, mask)
        if m and isinstance(v, (int, float)) and not isinstance(v, bool)
    )


def f_sumifs(ev, sum_range, *pairs):
    mask, _ = _matches(ev, list(zip(pairs[::2], pairs[1::2])))
    values = [v for row in _grid(ev, sum_range) for v in row]
    if len(values) != len(mask):
        raise _Err(VALUE)
    return sum(
        v
        for v, m in zip(values, mask)
        if m and isinstance(v, (int, float)) and not isinstance(v, bool)
    )


def f_countif(ev, rng, crit):
    mask, _ = _matches(ev, [(rng, crit)])
    return sum(mask)


def f_countifs(ev, *pairs):
    mask, _ = _matches(ev, list(zip(pairs[::2], pairs[1::2])))
    return sum(mask)


def f_averageif(ev, rng, crit, avg_range=None):
    mask, _ = _matches(ev, [(rng, crit)])
    values = [
        v
        for row in _grid(ev, _sized(avg_range, rng) if avg_range is not None else rng)
        for v in row
    ]
    nums = [
        v
        for v, m in zip(values, mask)
        if m and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not nums:
        raise _Err(DIV0)
    return sum(nums) / len(nums)


def f_averageifs(ev, avg_range, *pairs):
    mask, _ = _matches(ev, list(zip(pairs[::2], pairs[1::2])))
    values = [v for row in _grid(ev, avg_range) for v in row]
    nums = [
        v
        for v, m in zip(values, mask)
        if m and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not nums:
        raise _Err(DIV0)
    return sum(nums) / len(nums)


def f_sumproduct(ev, *arrays):
    grids = [[v for row in _grid(ev, a) for v in row] for a in arrays]
    if len({len(g) for g in grids}) != 1:
        raise _Err(VALUE)
    total = 0
    for vals in zip(*grids):
        p = 1
        for v in vals:
            p *= v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
        total += p
    return total


def f_vlookup(ev, value, table, col, approx=True):
    v = ev.scalar(value)
    grid = _grid(ev, table)
    c = int(to_num(ev.scalar(col)))
    if c < 1 or c > len(grid[0]):
        raise _Err(REF)
    approx = to_bool(ev.scalar(approx)) if approx is not None else False
    if not approx:
        for row in grid:
            if row[0] is not None and compare(row[0], v, "="):
                return row[c - 1]
        raise _Err(NA)
    hit = None
    for row in grid:
        if row[0] is not None and _rank(row[0]) == _rank(v) and compare(row[0], v, "<="):
            hit = row
    if hit is None:
        raise _Err(NA)
    return hit[c - 1]


def f_index(ev, rng, row, col=None):
    grid = _grid(ev, rng)
    r = int(to_num(ev.scalar(row)))
    c = int(to_num(ev.scalar(col))) if col is not None else 1
    if len(grid) == 1 and col is None:
        r, c = 1, r
    if r < 1 or c < 1 or r > len(grid) or c > len(grid[0]):
        raise _Err(REF)
    return grid[r - 1][c - 1]


def f_match(ev, value, rng, kind=1):
    v = ev.scalar(value)
    items = [x for row in _grid(ev, rng) for x in row]
    kind = int(to_num(ev.scalar(kind))) if kind is not None else 1
    if kind == 0:
        for i, x in enumerate(items):
            if x is not None and compare(x, v, "="):
                return i + 1
        raise _Err(NA)
    hit = None
    for i, x in enumerate(items):
        if x is None or _rank(x) != _rank(v):
            continue
        if (kind > 0 and compare(x, v, "<=")) or (kind < 0 and compare(x, v, ">=")):
            hit = i + 1
    if hit is None:
        raise _Err(NA)
    return hit


FUNCTIONS = {
    "SUM": f_sum,
    "AVERAGE": f_average,
    "MIN": f_min,
    "MAX": f_max,
    "MEDIAN": f_median,
    "COUNT": f_count,
    "COUNTA": f_counta,
    "COUNTBLANK": f_countblank,
    "ROUND": f_round,
    "ROUNDUP": f_roundup,
    "ROUNDDOWN": f_rounddown,
    "ABS": f_abs,
    "INT": f_int,
    "MOD": f_mod,
    "IF": f_if,
    "IFS": f_ifs,
    "IFERROR": f_iferror,
    "AND": f_and,
    "OR": f_or,
    "NOT": f_not,
    "SUMIF": f_sumif,
    "SUMIFS": f_sumifs,
    "COUNTIF": f_countif,
    "COUNTIFS": f_countifs,
    "AVERAGEIF": f_averageif,
    "AVERAGEIFS": f_averageifs,
    "SUMPRODUCT": f_sumproduct,
    "VLOOKUP": f_vlookup,
    "INDEX": f_index,
    "MATCH": f_match,
}
SUPPORTED = ", ".join(sorted(FUNCTIONS))
