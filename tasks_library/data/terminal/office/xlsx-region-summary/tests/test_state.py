"""Verifier: the Summary sheet of /app/sales.xlsx: layout, bold, number formats, and formulas whose
values, computed by xlformula over the pristine orders (tests/pristine/sales.xlsx) and over
orders with shuffled regions and changed amounts, equal the figures recomputed here."""

import random

import pytest
from xlcheck import assert_unchanged, check_formulas, load, sheet

ROWS = range(2, 182)


def expected(regions, amounts, names):
    out = {}
    for i, name in enumerate(names, start=2):
        idx = [r for r in ROWS if regions[r] == name]
        n, total = len(idx), sum(amounts[r] for r in idx)
        out[f"B{i}"], out[f"C{i}"], out[f"D{i}"] = n, total, total / n
    out["B7"] = len(ROWS)
    out["C7"] = sum(amounts.values())
    out["D7"] = out["C7"] / out["B7"]
    return out


@pytest.fixture(scope="module")
def books():
    return load("/app/sales.xlsx"), load("/tests/pristine/sales.xlsx")


@pytest.fixture(scope="module")
def pristine_inputs(books):
    ws = books[1]["Orders"]
    return {r: ws[f"B{r}"].value for r in ROWS}, {r: ws[f"E{r}"].value for r in ROWS}


def test_orders_unchanged(books):
    wb, pristine = books
    assert_unchanged(sheet(wb, "Orders"), pristine["Orders"])
    assert wb.sheetnames[:2] == ["Orders", "Summary"]


def test_layout(books, pristine_inputs):
    ws = sheet(books[0], "Summary")
    assert [ws[f"{c}1"].value for c in "ABCD"] == ["Region", "Orders", "Revenue", "Average order"]
    assert [ws[f"A{r}"].value for r in range(2, 7)] == sorted(set(pristine_inputs[0].values()))
    assert ws["A7"].value == "Total"
    for c in "ABCD":
        assert ws[f"{c}1"].font.b and ws[f"{c}7"].font.b, f"{c}1/{c}7 not bold"
    for r in range(2, 8):
        for c in "CD":
            assert ws[f"{c}{r}"].number_format == "#,##0.00", (
                f"{c}{r}",
                ws[f"{c}{r}"].number_format,
            )


def test_formulas(books, pristine_inputs):
    wb = books[0]
    regions, amounts = pristine_inputs
    names = sorted(set(regions.values()))
    scenarios = []
    for label, seed in [("the orders", None), ("altered orders 1", 1), ("altered orders 2", 2)]:
        reg, amt = dict(regions), dict(amounts)
        if seed is not None:
            rng = random.Random(seed)
            for r in ROWS:
                reg[r] = names[(r + seed) % 5] if r < 12 else rng.choice(names)
                amt[r] = round(rng.uniform(1, 9999), 2)
        overrides = {("Orders", f"B{r}"): reg[r] for r in ROWS}
        overrides.update({("Orders", f"E{r}"): amt[r] for r in ROWS})
        scenarios.append(
            (label, overrides, {("Summary", c): v for c, v in expected(reg, amt, names).items()})
        )
    check_formulas(wb, scenarios, tol=1e-6)
