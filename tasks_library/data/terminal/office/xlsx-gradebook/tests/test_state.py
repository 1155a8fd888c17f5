"""Verifier: /app/grades.xlsx: weighted scores, letters and the Stats sheet recomputed by
xlformula over the pristine scores and weights (tests/pristine/grades.xlsx) and over altered
ones; labels and bold; inputs unchanged."""

import random
from decimal import ROUND_HALF_UP, Decimal

import pytest
from xlcheck import assert_unchanged, check_formulas, load, sheet

ROWS = range(2, 32)
LABELS = ["Average", "Highest", "Lowest", "Count A", "Count B", "Count C", "Count D", "Count F"]


def rnd(x, places):
    return float(Decimal(x).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def letter(v):
    return "A" if v >= 90 else "B" if v >= 80 else "C" if v >= 70 else "D" if v >= 60 else "F"


def expected(scores, weights):
    cells = {}
    weighted = []
    for r, triple in scores.items():
        exact = sum(Decimal(repr(s)) * Decimal(repr(w)) for s, w in zip(triple, weights))
        assert (exact * 10) % 1 != Decimal("0.5"), "ambiguous rounding in the test data"
        e = rnd(exact, 1)
        weighted.append(e)
        cells[("Scores", f"E{r}")] = e
        cells[("Scores", f"F{r}")] = letter(e)
    cells[("Stats", "B2")] = rnd(Decimal(repr(sum(weighted) / len(weighted))), 2)
    cells[("Stats", "B3")] = max(weighted)
    cells[("Stats", "B4")] = min(weighted)
    for i, g in enumerate("ABCDF", start=5):
        cells[("Stats", f"B{i}")] = sum(letter(e) == g for e in weighted)
    return cells


@pytest.fixture(scope="module")
def books():
    return load("/app/grades.xlsx"), load("/tests/pristine/grades.xlsx")


def test_inputs_unchanged(books):
    wb, pristine = books
    assert_unchanged(sheet(wb, "Scores"), pristine["Scores"])
    assert_unchanged(sheet(wb, "Weights"), pristine["Weights"])


def test_labels(books):
    wb = books[0]
    ws = wb["Scores"]
    assert ws["E1"].value == "Weighted" and ws["F1"].value == "Grade"
    assert ws["E1"].font.b and ws["F1"].font.b
    st = sheet(wb, "Stats")
    assert (
        st["A1"].value == "Measure"
        and st["B1"].value == "Value"
        and st["A1"].font.b
        and st["B1"].font.b
    )
    assert [st[f"A{i}"].value for i in range(2, 10)] == LABELS


def test_formulas(books):
    wb, pristine = books
    ps, pw = pristine["Scores"], pristine["Weights"]
    scores = {r: tuple(ps[f"{c}{r}"].value for c in "BCD") for r in ROWS}
    weights = tuple(pw[f"B{r}"].value for r in (2, 3, 4))
    scenarios = [("the gradebook", {}, expected(scores, weights))]
    for seed, alt_weights in [(1, (0.2, 0.3, 0.5)), (2, (0.4, 0.1, 0.5))]:
        rng = random.Random(seed)
        # integer scores and weights in tenths: weighted scores have at most one decimal
        alt = {r: tuple(rng.randint(40, 100) for _ in range(3)) for r in ROWS}
        for r, t in zip(ROWS, (90, 80, 70, 60)):  # weighted scores exactly on the thresholds
            alt[r] = (t, t, t)
        overrides = {("Weights", f"B{r}"): w for r, w in zip((2, 3, 4), alt_weights)}
        for r, triple in alt.items():
            for c, v in zip("BCD", triple):
                overrides[("Scores", f"{c}{r}")] = v
        scenarios.append(
            (f"altered scores and weights {seed}", overrides, expected(alt, alt_weights))
        )
    # the pristine scenario evaluates the agent's own input cells: they were checked unchanged
    check_formulas(wb, scenarios, tol=1e-9)
