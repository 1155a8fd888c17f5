"""Verifier: /app/invoice.xlsx holds formulas in E8:E19 and E21:E23 whose values, computed by
xlformula from the pristine inputs (tests/pristine/invoice.xlsx) and from two altered sets of
inputs, equal the values recomputed here; the inputs are unchanged; number formats are set."""

import random
from decimal import ROUND_HALF_UP, Decimal

import pytest
from xlcheck import assert_unchanged, check_formulas, load, sheet

ROWS = range(8, 20)
OUT = [f"E{r}" for r in ROWS] + ["E21", "E22", "E23"]


def round2(x):
    return float(Decimal(repr(x)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def expected(inputs):
    lines = {f"E{r}": inputs[f"B{r}"] * inputs[f"C{r}"] * (1 - inputs[f"D{r}"]) for r in ROWS}
    sub = sum(lines.values())
    tax = round2(sub * inputs["B4"])
    return {**lines, "E21": sub, "E22": tax, "E23": sub + tax}


def altered(inputs, seed):
    rng = random.Random(seed)
    out = dict(inputs)
    out["B4"] = rng.choice([0.05, 0.07, 0.125, 0.19])
    for r in ROWS:
        out[f"B{r}"] = rng.randint(0, 40)
        out[f"C{r}"] = round(rng.uniform(1, 999), 2)
        out[f"D{r}"] = rng.choice([0, 0.05, 0.1, 0.2, 0.25])
    return out


@pytest.fixture(scope="module")
def books():
    return load("/app/invoice.xlsx"), load("/tests/pristine/invoice.xlsx")


def test_inputs_unchanged(books):
    wb, pristine = books
    assert_unchanged(sheet(wb, "Invoice"), sheet(pristine, "Invoice"))


def test_formulas(books):
    wb, pristine = books
    ws = pristine["Invoice"]
    inputs = {c: ws[c].value for c in ["B4"] + [f"{col}{r}" for r in ROWS for col in "BCD"]}
    scenarios = []
    for label, inp in [
        ("the invoice", inputs),
        ("altered inputs 1", altered(inputs, 1)),
        ("altered inputs 2", altered(inputs, 2)),
    ]:
        overrides = {("Invoice", c): v for c, v in inp.items()}
        scenarios.append((label, overrides, {("Invoice", c): v for c, v in expected(inp).items()}))
    check_formulas(wb, scenarios, tol=1e-6)


def test_number_format(books):
    wb, _ = books
    ws = wb["Invoice"]
    for c in OUT:
        assert ws[c].number_format == "#,##0.00", (c, ws[c].number_format)
