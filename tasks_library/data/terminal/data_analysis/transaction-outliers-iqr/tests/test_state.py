"""Verifier: /app/outliers.csv against the IQR rule applied, in plain Python, to the pristine copy
of the transactions in /tests/data."""

import csv
import math
from pathlib import Path

import pytest

HEADER = ["txn_id", "merchant_category", "amount", "direction", "lower_fence", "upper_fence"]


def quantile(sorted_values, p):
    pos = (len(sorted_values) - 1) * p
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@pytest.fixture(scope="module")
def expected():
    with open("/tests/data/transactions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    per_cat = {}
    for r in rows:
        per_cat.setdefault(r["merchant_category"], []).append(float(r["amount"]))
    fences = {}
    for cat, values in per_cat.items():
        values.sort()
        q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
        fences[cat] = (q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1))
    out = []
    for r in rows:
        lo, hi = fences[r["merchant_category"]]
        a = float(r["amount"])
        if a < lo or a > hi:
            out.append(
                (r["txn_id"], r["merchant_category"], a, "low" if a < lo else "high", lo, hi)
            )
    out.sort()
    assert len(out) > 10 and {d for *_, d, _, _ in out} == {"low", "high"}
    return out


def test_outliers(expected):
    path = Path("/app/outliers.csv")
    assert path.is_file(), "/app/outliers.csv is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == HEADER
        got = [r for r in reader if r]
    assert [r[0] for r in got] == [e[0] for e in expected], "wrong set or order of txn_id"
    for row, (_tid, cat, amount, direction, lo, hi) in zip(got, expected):
        assert len(row) == 6, row
        assert row[1] == cat and row[3] == direction, (row, cat, direction)
        assert abs(float(row[2]) - amount) < 0.005, row
        assert abs(float(row[4]) - lo) < 0.00051 and abs(float(row[5]) - hi) < 0.00051, (
            row,
            lo,
            hi,
        )
