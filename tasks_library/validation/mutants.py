"""Mutants of a task's reference solution, for measuring how strong its test suite is.

A mutant is the reference program with one small syntactic fault in it (``<`` for ``<=``,
``k + 1`` for ``k``, ``return None`` for ``return x``...). A test suite *kills* a mutant
when at least one of its tests fails on it; the share of mutants killed (the mutation
score) estimates how many plausible wrong solutions the suite would let through, which
is what matters for a reward signal in RL: a weak suite rewards wrong code.

The operators follow the classic mutation-testing catalogue (Jia & Harman, "An Analysis
and Survey of the Development of Mutation Testing", IEEE TSE 2011; Offutt et al.'s
sufficient operator set), in the form PIT's default mutators (conditionals boundary,
negate conditionals, math, return values, inline constants) and mutmut use them, as
EvalPlus did for HumanEval+. Only the completion (the reference body) is mutated: the
prompt is the task's fixed interface and its docstring the specification.

Everything here is pure (no execution); running the mutants is the sandbox's job.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

OPERATORS = ("arithmetic", "compare", "constant", "boundary", "return", "boolean")
SNIPPET_CHARS = 60


@dataclass(frozen=True)
class Mutant:
    """One mutant of a reference solution.

    ``id`` is stable for a given prompt and completion (``m<k>:<operator>:line <n>``, ``k``
    the mutant's rank among all distinct mutants in walk order, whatever ``limit`` is);
    ``line`` is 1-based in the completion; ``program`` is the whole program to run.
    """

    id: str
    operator: str
    line: int
    description: str
    program: str


# --------------------------------------------------------------------------- shared


def _snippet(text: str) -> str:
    """One line of at most SNIPPET_CHARS characters, for a description."""
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 3] + "..."


def _select(candidates: list[tuple[str, int, str, str]], limit: int) -> list[Mutant]:
    """Turn distinct ``(operator, line, description, program)`` candidates, in walk order,
    into at most ``limit`` mutants spread over the operators.

    Each operator gets an equal share (round robin, so a share one operator cannot fill
    goes to the others), and within an operator the kept mutants are evenly spaced
    over its list, so that a long function is not judged on its first lines only.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    by_operator: dict[str, list[int]] = {op: [] for op in OPERATORS}
    for index, (operator, *_rest) in enumerate(candidates):
        by_operator[operator].append(index)
    quota = {op: 0 for op in OPERATORS}
    left = min(limit, len(candidates))
    while left:
        for op in OPERATORS:
            if left and quota[op] < len(by_operator[op]):
                quota[op] += 1
                left -= 1
    chosen: list[int] = []
    for op in OPERATORS:
        items, count = by_operator[op], quota[op]
        chosen.extend(items[(i * len(items)) // count] for i in range(count))
    mutants = []
    for index in sorted(chosen):
        operator, line, description, program = candidates[index]
        mutants.append(
            Mutant(f"m{index}:{operator}:line {line}", operator, line, description, program)
        )
    return mutants


def _dedupe(
    candidates: Iterator[tuple[str, int, str, str]], original: str
) -> list[tuple[str, int, str, str]]:
    """Keep the first candidate of each distinct program, dropping those equal to the original."""
    seen = {original}
    kept = []
    for candidate in candidates:
        if candidate[3] not in seen:
            seen.add(candidate[3])
            kept.append(candidate)
    return kept


# --------------------------------------------------------------------------- Python

_ARITHMETIC: dict[type, type] = {  # mutmut's mapping; PIT's "math" mutator is the same idea
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
_COMPARE: dict[type, type] = {  # boundary (< vs <=) and negation (== vs !=) of conditions
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.And: "and",
    ast.Or: "or",
}

# A location in the tree: the parent's field and, for list fields, the index in it.
_Path = tuple[tuple[str, int | None], ...]
# A mutation: given the (copied) node, return the node to put in its place.
_Edit = Callable[[ast.AST], ast.AST]


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield field, None, value
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield field, index, item


def _walk(node: ast.AST, path: _Path = ()) -> Iterator[tuple[_Path, ast.AST]]:
    """Pre-order walk with each node's path: source order, so mutant numbers read top-down."""
    yield path, node
    for field, index, child in _children(node):
        yield from _walk(child, path + ((field, index),))


def _replace_at(module: ast.Module, path: _Path, edit: _Edit) -> ast.Module:
    """A copy of ``module`` with the node at ``path`` replaced by ``edit(node)``."""
    module = copy.deepcopy(module)
    parent: ast.AST = module
    for field, index in path[:-1]:
        value = getattr(parent, field)
        parent = value if index is None else value[index]
    field, index = path[-1]
    if index is None:
        setattr(parent, field, edit(getattr(parent, field)))
    else:
        getattr(parent, field)[index] = edit(getattr(parent, field)[index])
    return module


def _shifted(expr: ast.expr, delta: int) -> ast.expr:
    """``expr + delta`` as an expression; folded when ``expr`` is an int literal, so that
    ``range(0, 10)`` becomes ``range(0, 11)`` and not ``range(0, 10 + 1)``."""
    value = None
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        value = expr.value
    elif (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
        and type(expr.operand.value) is int
    ):
        value = -expr.operand.value
    if value is not None:
        value += delta
        return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))
    return ast.BinOp(expr, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))


def frozen_nodes(module: ast.Module) -> set[int]:
    """ids of nodes that are not code to mutate: docstrings and other bare string
    statements, type annotations, and the literal parts and format specs of f-strings
    (changing those tests nothing but the text the mutant prints)."""
    frozen: set[int] = set()

    def freeze(node: ast.AST | None) -> None:
        if node is not None:
            frozen.update(id(sub) for sub in ast.walk(node))

    for node in ast.walk(module):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            freeze(node)
        elif isinstance(node, ast.arg):
            freeze(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            freeze(node.returns)
        elif isinstance(node, ast.AnnAssign):
            freeze(node.annotation)
        elif isinstance(node, ast.JoinedStr):
            frozen.update(id(part) for part in node.values if isinstance(part, ast.Constant))
        elif isinstance(node, ast.FormattedValue):
            freeze(node.format_spec)
    return frozen


def _set_op(op_type: type) -> _Edit:
    def edit(node: ast.AST) -> ast.AST:
        node.op = op_type()
        return node

    return edit


def _set_compare(position: int, op_type: type) -> _Edit:
    def edit(node: ast.AST) -> ast.AST:
        node.ops[position] = op_type()
        return node

    return edit


def _set_value(value: object) -> _Edit:
    def edit(node: ast.AST) -> ast.AST:
        node.value = value
        return node

    return edit


def _return_none(node: ast.AST) -> ast.AST:
    node.value = ast.Constant(None)
    return node


def _drop_not(node: ast.AST) -> ast.AST:
    return node.operand


def _shift_range_stop(position: int, delta: int) -> _Edit:
    def edit(node: ast.AST) -> ast.AST:
        node.args[position] = _shifted(node.args[position], delta)
        return node

    return edit


def _shift_slice(bound: str, delta: int) -> _Edit:
    def edit(node: ast.AST) -> ast.AST:
        setattr(node, bound, _shifted(getattr(node, bound), delta))
        return node

    return edit


def python_node_edits(node: ast.AST) -> Iterator[tuple[str, _Edit, str]]:
    """The mutations of one node: ``(operator, edit, description without the line)``; ``edit``
    takes a copy of ``node`` and returns the node to put in its place (the repository bug
    generator, ``tasks_library/generators/bugs.py``, applies them to real projects' sources)."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITHMETIC:
        new = _ARITHMETIC[type(node.op)]
        suffix = "=" if isinstance(node, ast.AugAssign) else ""
        yield (
            "arithmetic",
            _set_op(new),
            f"`{_SYMBOL[type(node.op)]}{suffix}` -> `{_SYMBOL[new]}{suffix}`",
        )
    elif isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            new = _COMPARE[type(op)]
            yield (
                "compare",
                _set_compare(position, new),
                f"`{_SYMBOL[type(op)]}` -> `{_SYMBOL[new]}`",
            )
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield "boolean", _set_op(new), f"`{_SYMBOL[type(node.op)]}` -> `{_SYMBOL[new]}`"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield (
            "boolean",
            _drop_not,
            f"`{_snippet(ast.unparse(node))}` -> `{_snippet(ast.unparse(node.operand))}`",
        )
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            new: object = not value
        elif isinstance(value, int):
            new = {0: 1, 1: 0}.get(value, value + 1)
        elif isinstance(value, float):
            new = 1.0 if value == 0 else value + 1
        elif isinstance(value, str) and value:
            new = ""
        else:  # None, Ellipsis, bytes, complex, "": nothing sensible to change
            return
        yield "constant", _set_value(new), f"`{_snippet(repr(value))}` -> `{_snippet(repr(new))}`"
    elif isinstance(node, ast.Return):
        if node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            yield "return", _return_none, f"`{_snippet(ast.unparse(node))}` -> `return None`"
    elif isinstance(node, ast.Call):
        # Off-by-one loop bounds (EvalPlus / PIT's conditionals boundary, on the loop itself).
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and 1 <= len(node.args) <= 3
            and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            position = 0 if len(node.args) == 1 else 1
            for delta in (1, -1):
                after = copy.deepcopy(node)
                after.args[position] = _shifted(after.args[position], delta)
                yield (
                    "boundary",
                    _shift_range_stop(position, delta),
                    f"`{_snippet(ast.unparse(node))}` -> `{_snippet(ast.unparse(after))}`",
                )
    elif isinstance(node, ast.Slice):
        for bound in ("lower", "upper"):
            if getattr(node, bound) is not None:
                for delta in (1, -1):
                    after = copy.deepcopy(node)
                    setattr(after, bound, _shifted(getattr(after, bound), delta))
                    yield (
                        "boundary",
                        _shift_slice(bound, delta),
                        (
                            f"slice `{_snippet(ast.unparse(node))}` -> "
                            f"`{_snippet(ast.unparse(after))}`"
                        ),
                    )


def python_mutants(prompt: str, completion: str, *, limit: int = 40) -> list[Mutant]:
    """Mutants of a Python reference solution (one mutation each), mutating the completion only.

    Args:
        prompt: the task's prompt (signature and docstring; it may end mid-line).
        completion: the reference body; the program is ``prompt + completion``.
        limit: at most this many mutants, shared evenly between the operators
            (``arithmetic``: ``+``/``-``, ``*``/``/``, ``//`` -> ``/``, ``%`` -> ``//``...;
            ``compare``: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``,
            ``is``/``is not``; ``constant``: int ``k`` -> ``k + 1`` (``0``/``1`` swap),
            ``True``/``False``, non-empty string -> ``""``; ``boundary``: the stop of ``range(...)``
            and slice bounds +-1; ``return``: ``return x`` -> ``return None``; ``boolean``:
            ``and``/``or``, drop ``not``).

    Returns:
        Distinct mutants in walk (source) order. Each ``program`` is ``ast.unparse`` of the
        mutated module, so comments and formatting are normalised (the prompt's docstring
        text is kept); no program equals the unparsed original, and every one parses.

    Raises:
        SyntaxError: ``prompt + completion`` does not parse (unchanged from :func:`ast.parse`).
        ValueError: ``limit`` is negative.

    Operators after Jia & Harman's survey (IEEE TSE 2011) and PIT's default mutators,
    applied to HumanEval the way EvalPlus (Liu et al., NeurIPS 2023) measured suite strength.
    """
    module = ast.parse(prompt + completion)
    # The completion starts at this (line, UTF-8 column), since the prompt may end mid-line;
    # ast's col_offset counts UTF-8 bytes.
    start_line = prompt.count("\n") + 1
    start_col = len(prompt.rsplit("\n", 1)[-1].encode("utf-8"))
    frozen = frozen_nodes(module)
    original = ast.unparse(module)

    def candidates() -> Iterator[tuple[str, int, str, str]]:
        for path, node in _walk(module):
            if not path or id(node) in frozen or not hasattr(node, "lineno"):
                continue
            if (node.lineno, node.col_offset) < (start_line, start_col):
                continue  # the prompt's own code (helpers, the signature) is the interface
            line = node.lineno - start_line + 1
            for operator, edit, description in python_node_edits(node):
                program = ast.unparse(_replace_at(module, path, edit))
                yield operator, line, f"line {line}: {description}", program

    return _select(_dedupe(candidates(), original), limit)


# --------------------------------------------------------------------------- JavaScript


@dataclass(frozen=True)
class JsToken:
    """A JavaScript token: ``kind`` is one of name, number, string, template, regex,
    punct, comment; ``start``/``end`` are offsets in the source."""

    kind: str
    text: str
    start: int
    end: int


_JS_PUNCTUATORS = sorted(
    """>>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= /=
    %= &= |= ^= ** << >> { } ( ) [ ] ; , < > + - * / % & | ^ ! ~ ? : = . @ #""".split(),
    key=len,
    reverse=True,
)
_JS_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+n?|0[bB][01_]+n?|0[oO][0-7_]+n?|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?n?"
)
_JS_NAME = re.compile(r"(?:[^\W\d]|\$)[\w$]*")
# After these keywords an expression starts: a `/` there opens a regex, a `+` is unary.
_JS_EXPRESSION_KEYWORDS = frozenset(
    (
        "return typeof instanceof in of new delete void throw case do else yield await let const "
        "var"
    ).split()
)
_JS_REGEX_AFTER = frozenset("( , = : [ ! & | ? { } ; + - * % < > ~ ^".split()) | {
    p
    for p in _JS_PUNCTUATORS
    if p.endswith("=") or p in ("&&", "||", "??", "=>", "**", "<<", ">>", ">>>")
}


def _skip_string(source: str, i: int) -> int:
    """End of the quoted string starting at ``i`` (an unterminated one stops at the line end)."""
    quote, i = source[i], i + 1
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
        elif char == quote:
            return i + 1
        elif char == "\n":
            return i
        else:
            i += 1
    return len(source)


def _skip_template(source: str, i: int) -> int:
    """End of the template literal starting at ``i``, with ``${...}`` expressions (which may
    hold strings, comments and templates of their own) skipped by brace depth."""
    i += 1
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
        elif char == "`":
            return i + 1
        elif source.startswith("${", i):
            i += 2
            depth = 1
            while i < len(source) and depth:
                char = source[i]
                if char in "'\"":
                    i = _skip_string(source, i)
                elif char == "`":
                    i = _skip_template(source, i)
                elif source.startswith("/*", i):
                    end = source.find("*/", i + 2)
                    i = len(source) if end < 0 else end + 2
                elif source.startswith("//", i):
                    end = source.find("\n", i)
                    i = len(source) if end < 0 else end
                else:
                    depth += {"{": 1, "}": -1}.get(char, 0)
                    i += 1
        else:
            i += 1
    return len(source)


def _skip_regex(source: str, i: int) -> int | None:
    """End of the regex literal starting at ``i`` (flags included), or None if the line ends
    first (then the ``/`` was a division after all)."""
    j, in_class = i + 1, False
    while j < len(source):
        char = source[j]
        if char == "\n":
            return None
        if char == "\\":
            j += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "/" and not in_class:
            j += 1
            while j < len(source) and (source[j].isalnum() or source[j] in "_$"):
                j += 1
            return j
        j += 1
    return None


def _regex_allowed(previous: JsToken | None) -> bool:
    """Whether a ``/`` after ``previous`` starts a regex: the usual lexer heuristic (a value
    cannot end with an operator or an opening bracket, so an operand must follow)."""
    if previous is None:
        return True
    if previous.kind == "name":
        return previous.text in _JS_EXPRESSION_KEYWORDS
    return previous.kind == "punct" and previous.text in _JS_REGEX_AFTER


def javascript_tokens(source: str) -> list[JsToken]:
    """Tokenize JavaScript well enough to tell code from strings, templates, regexes and
    comments (whitespace is dropped; an unknown character is a one-character punct).

    Template literals are single tokens, ``${...}`` included; a ``/`` is a regex when the
    previous significant token cannot end an operand (see :func:`_regex_allowed`).

    Returns:
        The tokens in source order, comments included (as kind ``comment``).

    Raises:
        Nothing: unterminated strings, comments and templates end at the line or source end.
    """
    tokens: list[JsToken] = []
    previous: JsToken | None = None  # last token that is not a comment
    i = 0
    while i < len(source):
        char = source[i]
        if char.isspace():
            i += 1
            continue
        start = i
        if source.startswith("//", i):
            end = source.find("\n", i)
            kind, i = "comment", len(source) if end < 0 else end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            kind, i = "comment", len(source) if end < 0 else end + 2
        elif char in "'\"":
            kind, i = "string", _skip_string(source, i)
        elif char == "`":
            kind, i = "template", _skip_template(source, i)
        elif (
            char == "/" and _regex_allowed(previous) and (end := _skip_regex(source, i)) is not None
        ):
            kind, i = "regex", end
        elif (match := _JS_NUMBER.match(source, i)) and not (
            char == "." and previous and previous.kind == "name"
        ):
            kind, i = "number", match.end()
        elif match := _JS_NAME.match(source, i):
            kind, i = "name", match.end()
        else:
            text = next((p for p in _JS_PUNCTUATORS if source.startswith(p, i)), char)
            if text == "?." and source[i + 2 : i + 3].isdigit():
                text = "?"  # `a ?.5 : b` is a conditional, not optional chaining
            kind, i = "punct", i + len(text)
        token = JsToken(kind, source[start:i], start, i)
        tokens.append(token)
        if kind != "comment":
            previous = token
    return tokens


_JS_COMPARE = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "===": "!==",
    "!==": "===",
    "==": "!=",
    "!=": "==",
}
_JS_ARITHMETIC = {"+": "-", "-": "+", "*": "/", "/": "*"}
_JS_BOOLEAN = {"&&": "||", "||": "&&", "!": ""}
# Tokens after which `+`, `-`, `*`, `/` are binary operators rather than prefixes.
_JS_OPERAND_END_PUNCT = frozenset({")", "]"})
# A token that, after a line break, continues the return expression (no automatic semicolon).
_JS_CONTINUES = frozenset(_JS_PUNCTUATORS) - {
    "}",
    ")",
    "]",
    ";",
    "++",
    "--",
    "!",
    "~",
    "{",
    "@",
    "#",
}
_JS_INT = re.compile(r"[1-9]\d*|0")
_JS_DECIMAL = re.compile(r"\d+\.\d*")


def _is_operand_end(token: JsToken | None) -> bool:
    if token is None:
        return False
    if token.kind == "name":
        return token.text not in _JS_EXPRESSION_KEYWORDS
    if token.kind in ("number", "string", "template", "regex"):
        return True
    return token.kind == "punct" and token.text in _JS_OPERAND_END_PUNCT


def _return_extent(code: list[JsToken], k: int, source: str) -> tuple[int, int] | None:
    """Source span of the expression of the ``return`` at ``code[k]``, or None for a bare
    ``return``. It ends at a ``;`` or an unmatched closer at bracket depth 0, or at a line
    break that automatic semicolon insertion would end the statement at."""
    first = k + 1
    if (
        first >= len(code)
        or code[first].text in (";", "}")
        or "\n" in source[code[k].end : code[first].start]
    ):
        return None
    depth, last = 0, first
    for j in range(first, len(code)):
        token = code[j]
        if depth == 0 and j > first:
            if token.text == ";" or token.text in (")", "]", "}"):
                break
            continues = token.kind == "punct" and token.text in _JS_CONTINUES
            if "\n" in source[code[j - 1].end : token.start] and not continues:
                break
        if token.kind == "punct" and token.text in ("(", "[", "{"):
            depth += 1
        elif token.kind == "punct" and token.text in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                break
        last = j
    return code[first].start, code[last].end


def _length_bound(code: list[JsToken], k: int) -> bool:
    """Whether ``code[k]`` compares with ``xs.length`` (``i < xs.length``, a loop bound).

    Its ``<=`` mutant only reads ``xs[xs.length]``, which is ``undefined`` in JavaScript,
    and so is nearly always equivalent (comparisons with it are false, arithmetic gives
    NaN): over HumanEval-X such mutants were the bulk of the survivors that no input can
    kill, and marked good suites weak. Python raises IndexError instead, so keeps them.
    """
    rest = [t.text for t in code[k + 1 : k + 4]]
    return len(rest) == 3 and rest[1] in (".", "?.") and rest[2] == "length"


def _javascript_edits(
    code: list[JsToken], k: int, source: str
) -> Iterator[tuple[str, int, int, str]]:
    """Mutations at significant token ``code[k]``: ``(operator, start, end, replacement)``."""
    token = code[k]
    previous = code[k - 1] if k else None
    after_dot = previous is not None and previous.text in (".", "?.")
    if token.kind == "punct":
        if token.text in _JS_COMPARE and not (token.text in ("<", "<=") and _length_bound(code, k)):
            yield "compare", token.start, token.end, _JS_COMPARE[token.text]
        elif token.text in _JS_ARITHMETIC and _is_operand_end(previous):
            yield "arithmetic", token.start, token.end, _JS_ARITHMETIC[token.text]
        elif token.text in _JS_BOOLEAN:
            yield "boolean", token.start, token.end, _JS_BOOLEAN[token.text]
    elif token.kind == "number" and not after_dot:
        if _JS_INT.fullmatch(token.text):
            value = int(token.text)
            yield "constant", token.start, token.end, str({0: 1, 1: 0}.get(value, value + 1))
        elif _JS_DECIMAL.fullmatch(token.text):
            value = float(token.text)
            yield "constant", token.start, token.end, repr(1.0 if value == 0 else value + 1)
    elif token.kind == "name" and not after_dot:
        if token.text in ("true", "false"):
            yield "constant", token.start, token.end, "false" if token.text == "true" else "true"
        elif token.text == "return":
            extent = _return_extent(code, k, source)
            if extent is not None and source[extent[0] : extent[1]] != "undefined":
                yield "return", extent[0], extent[1], "undefined"


def javascript_mutants(prompt: str, completion: str, *, limit: int = 40) -> list[Mutant]:
    """Mutants of a JavaScript reference solution, by token substitution in the completion.

    Args:
        prompt: the task's prompt (comment and declaration, e.g. ``const f = (x) => {``).
        completion: the reference body; the program is ``prompt + completion``.
        limit: at most this many mutants, shared evenly between the operators
            (``compare``: ``<``/``<=``, ``>``/``>=``, ``===``/``!==``, ``==``/``!=``;
            ``arithmetic``: binary ``+``/``-``, ``*``/``/`` (``++``, ``+=``, ``=>``, ``**`` are
            other tokens and left alone); ``boolean``: ``&&``/``||``, drop ``!``; ``constant``:
            decimal ``k`` -> ``k + 1`` (``0``/``1`` swap), ``true``/``false``; ``return``:
            ``return x;`` -> ``return undefined;``).

    Returns:
        Distinct mutants in source order; each ``program`` is ``prompt`` followed by the
        completion with one token (or one return expression) replaced. Strings, template
        literals, regex literals and comments are never changed, nor is the prompt. A
        substitution that would fuse with a neighbouring token (``a-+b`` -> ``a++b``) is dropped.

    Raises:
        ValueError: ``limit`` is negative.

    There is no JavaScript parser in the standard library, so this is a tokenizer, not a
    syntax tree: the same operator catalogue as :func:`python_mutants` (Jia & Harman's survey;
    PIT's default mutators) minus the ones that need a tree (range/slice bounds).
    """
    program = prompt + completion
    tokens = javascript_tokens(program)
    code = [t for t in tokens if t.kind != "comment"]
    offset = len(prompt)

    def candidates() -> Iterator[tuple[str, int, str, str]]:
        for k, token in enumerate(code):
            if token.start < offset:
                continue  # the prompt, and a token the prompt's last line starts
            for operator, start, end, replacement in _javascript_edits(code, k, program):
                mutated = program[:start] + replacement + program[end:]
                if not _same_tokens(tokens, javascript_tokens(mutated), start, end, replacement):
                    continue
                line = program.count("\n", offset, start) + 1
                before = (
                    program[start:end] if operator != "return" else "return " + program[start:end]
                )
                after = replacement if operator != "return" else "return undefined"
                change = (
                    f"`{_snippet(before)}` -> `{_snippet(after)}`" if after else f"drop `{before}`"
                )
                description = f"line {line}: {change}"
                yield operator, line, description, mutated

    return _select(_dedupe(candidates(), program), limit)


def _same_tokens(
    old: list[JsToken], new: list[JsToken], start: int, end: int, replacement: str
) -> bool:
    """Whether the mutated program tokenizes as the original with only the span [start, end)
    replaced (no token fused with a neighbour, no string or comment opened or closed)."""
    shift = len(replacement) - (end - start)
    before = [(t.kind, t.text) for t in old if t.end <= start]
    after = [(t.kind, t.text) for t in old if t.start >= end]
    new_before = [(t.kind, t.text) for t in new if t.end <= start]
    new_after = [(t.kind, t.text) for t in new if t.start >= end + shift]
    return before == new_before and after == new_after
