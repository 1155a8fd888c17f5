"""Verifier: /app/budget.xlsx: variance formulas recomputed by xlformula over the pristine
figures (tests/pristine/budget.xlsx) and altered ones, totals, number formats, bold labels, and
a "cell value < 0" conditional format with font colour 9C0006 on exactly D2:D11."""

import random

import pytest
from xlcheck import assert_unchanged, check_formulas, load, sheet

ROWS = range(2, 12)


@pytest.fixture(scope="module")
def books():
    return load("/app/budget.xlsx"), load("/tests/pristine/budget.xlsx")


def test_inputs_unchanged(books):
    wb, pristine = books
    assert_unchanged(sheet(wb, "Budget"), pristine["Budget"])


def test_labels_and_formats(books):
    ws = books[0]["Budget"]
    assert ws["D1"].value == "Variance" and ws["E1"].value == "Variance %"
    assert ws["A12"].value == "Total"
    for c in ("D1", "E1", "A12"):
        assert ws[c].font.b, f"{c} not bold"
    for r in range(2, 13):
        for col in "BCD":
            if r == 12 or col == "D":
                assert ws[f"{col}{r}"].number_format == "#,##0.00", f"{col}{r}"
        assert ws[f"E{r}"].number_format == "0.0%", f"E{r}"


def test_formulas(books):
    wb, pristine = books
    pw = pristine["Budget"]
    base = {r: (pw[f"B{r}"].value, pw[f"C{r}"].value) for r in ROWS}
    scenarios = []
    for label, seed in [("the budget", None), ("altered figures 1", 1), ("altered figures 2", 2)]:
        vals = dict(base)
        if seed is not None:
            rng = random.Random(seed)
            vals = {
                r: (rng.randrange(10, 500) * 1000, round(rng.uniform(5000, 600000), 2))
                for r in ROWS
            }
        overrides, cells = {}, {}
        for r, (b, c) in vals.items():
            overrides[("Budget", f"B{r}")], overrides[("Budget", f"C{r}")] = b, c
            cells[("Budget", f"D{r}")] = c - b
            cells[("Budget", f"E{r}")] = (c - b) / b
        tb, tc = sum(b for b, _ in vals.values()), sum(c for _, c in vals.values())
        cells.update(
            {
                ("Budget", "B12"): tb,
                ("Budget", "C12"): tc,
                ("Budget", "D12"): tc - tb,
                ("Budget", "E12"): (tc - tb) / tb,
            }
        )
        scenarios.append((label, overrides, cells))
    check_formulas(wb, scenarios, tol=1e-6)


def test_conditional_format(books):
    ws = books[0]["Budget"]
    found = []
    for cf in ws.conditional_formatting:
        for rule in cf.rules:
            font = rule.dxf.font if rule.dxf is not None else None
            rgb = font.color.rgb if font is not None and font.color is not None else None
            found.append(
                (
                    str(cf.sqref),
                    rule.type,
                    rule.operator,
                    list(rule.formula or []),
                    rgb[-6:].upper() if isinstance(rgb, str) else None,
                )
            )
    assert ("D2:D11", "cellIs", "lessThan", ["0"], "9C0006") in found, found
