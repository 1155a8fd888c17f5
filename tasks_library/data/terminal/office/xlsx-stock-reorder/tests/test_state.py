"""Verifier: /app/inventory.xlsx: formulas in F2:G41 recomputed by xlformula over the pristine
stock figures (tests/pristine/inventory.xlsx) and over altered ones; fills exactly on the rows
that need reordering in the pristine data; header bold and grey; frozen panes; inputs unchanged."""

import random

import pytest
from xlcheck import assert_unchanged, check_formulas, load, sheet

ROWS = range(2, 42)


def colour(cell):
    fill = cell.fill
    if fill is None or fill.fill_type != "solid":
        return None
    rgb = fill.fgColor.rgb if fill.fgColor is not None else None
    return rgb[-6:].upper() if isinstance(rgb, str) else "?"


@pytest.fixture(scope="module")
def books():
    return load("/app/inventory.xlsx"), load("/tests/pristine/inventory.xlsx")


def test_inputs_unchanged(books):
    wb, pristine = books
    assert_unchanged(sheet(wb, "Stock"), pristine["Stock"])


def test_header(books):
    ws = books[0]["Stock"]
    assert ws["F1"].value == "Status" and ws["G1"].value == "Stock value"
    for col in "ABCDEFG":
        assert ws[f"{col}1"].font.b, f"{col}1 not bold"
        assert colour(ws[f"{col}1"]) == "D9D9D9", (f"{col}1", colour(ws[f"{col}1"]))
    assert ws.freeze_panes == "A2", ws.freeze_panes


def test_highlight(books):
    ws, pw = books[0]["Stock"], books[1]["Stock"]
    flagged = [r for r in ROWS if pw[f"C{r}"].value < pw[f"D{r}"].value]
    assert 3 <= len(flagged) < 40
    for r in ROWS:
        want = "FFC7CE" if r in flagged else None
        for col in "ABCDEFG":
            assert colour(ws[f"{col}{r}"]) == want, (f"{col}{r}", colour(ws[f"{col}{r}"]), want)


def test_formulas_and_format(books):
    wb, pristine = books
    pw = pristine["Stock"]
    base = {r: (pw[f"C{r}"].value, pw[f"D{r}"].value, pw[f"E{r}"].value) for r in ROWS}
    scenarios = []
    for label, seed in [("the stock", None), ("altered stock 1", 1), ("altered stock 2", 2)]:
        vals = dict(base)
        if seed is not None:
            rng = random.Random(seed)
            for r in ROWS:
                level = rng.choice([10, 30, 60])
                on_hand = level + rng.choice([-5, -1, 0, 1, 7]) if r % 3 else rng.randint(0, 200)
                vals[r] = (on_hand, level, round(rng.uniform(0.1, 50), 2))
        overrides = {}
        cells = {}
        for r, (c, d, e) in vals.items():
            overrides.update({("Stock", f"C{r}"): c, ("Stock", f"D{r}"): d, ("Stock", f"E{r}"): e})
            cells[("Stock", f"F{r}")] = "REORDER" if c < d else "OK"
            cells[("Stock", f"G{r}")] = c * e
        scenarios.append((label, overrides, cells))
    check_formulas(wb, scenarios, tol=1e-6)
    ws = wb["Stock"]
    for r in ROWS:
        assert ws[f"G{r}"].number_format == "#,##0.00", (f"G{r}", ws[f"G{r}"].number_format)
