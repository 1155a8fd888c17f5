"""Workbook checks shared by the spreadsheet tasks' verifiers.

A cell that must hold a formula is checked three ways: it holds a formula (openpyxl keeps the
text, it computes nothing), the formula evaluated by xlformula over the PRISTINE inputs gives the
value recomputed here from those inputs, and evaluated over altered inputs it gives the value
recomputed from the altered ones (so a constant written as "=1234.5" fails).
"""

import datetime
import math
from pathlib import Path

from openpyxl import load_workbook
from xlformula import Evaluator, FormulaError, XlError, is_formula


def load(path):
    path = Path(path)
    assert path.is_file(), f"{path} is missing"
    return load_workbook(path)


def sheet(wb, title):
    assert title in wb.sheetnames, f"no sheet named {title!r} (sheets: {wb.sheetnames})"
    return wb[title]


def constants(ws):
    """{coord: value} of the sheet's non-empty cells that are not formulas."""
    out = {}
    for row in ws.iter_rows():
        for c in row:
            if c.value is not None and not is_formula(c.value):
                out[c.coordinate] = c.value
    return out


def same(a, b):
    if isinstance(a, (datetime.datetime, datetime.date)) or isinstance(
        b, (datetime.datetime, datetime.date)
    ):
        return _day(a) == _day(b)
    if (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return abs(a - b) <= 1e-9
    return a == b


def _day(v):
    if isinstance(v, datetime.datetime):
        return v.date()
    return v


def assert_unchanged(ws_agent, ws_pristine):
    """Every non-empty cell of the pristine sheet holds the same value in the agent's sheet."""
    for coord, want in constants(ws_pristine).items():
        got = ws_agent[coord].value
        assert same(got, want), f"{ws_pristine.title}!{coord} was {want!r}, now {got!r}"


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_formulas(wb, scenarios, tol=1e-6):
    """scenarios: [(label, overrides, {(sheet, coord): expected})]. Each cell must hold a
    formula, and evaluate to the expected value under each scenario's overrides."""
    first = scenarios[0][2]
    for title, coord in first:
        value = wb[title][coord].value
        assert is_formula(value), f"{title}!{coord} must hold a formula, it holds {value!r}"
    for label, overrides, cells in scenarios:
        ev = Evaluator(wb, overrides)
        for (title, coord), want in cells.items():
            try:
                got = ev.cell(title, coord)
            except (FormulaError, RecursionError) as exc:
                raise AssertionError(f"{title}!{coord}: {exc}") from None
            assert not isinstance(got, XlError), f"{title}!{coord} evaluates to {got} ({label})"
            if isinstance(want, str):
                assert got == want, f"{title}!{coord} = {got!r}, expected {want!r} ({label})"
            else:
                assert number(got) and abs(got - want) <= tol, (
                    f"{title}!{coord} = {got!r}, expected {want!r} ({label})"
                )
