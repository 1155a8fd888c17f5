"""Verifier: /app/report/expense_report.csv against the report rebuilt here (with exact decimal
arithmetic) from the pristine expenses and rates (tests/pristine/data): header, row order,
labels, counts, and totals with exactly 2 decimals."""

import csv
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def expected():
    rates = {
        k: Decimal(repr(v))
        for k, v in json.load(open("/tests/pristine/data/rates.json"))["to_usd"].items()
    }
    groups = {}
    with open("/tests/pristine/data/expenses.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["status"] for r in rows} == {"approved", "rejected", "pending"}
    for r in rows:
        if r["status"] == "approved":
            g = groups.setdefault((r["employee"], r["category"]), [0, Decimal(0)])
            g[0] += 1
            g[1] += Decimal(r["amount"]) * rates[r["currency"]]
    out, all_n, all_t = [], 0, Decimal(0)
    for emp in sorted({e for e, _ in groups}):
        cats = sorted(
            ((c, v) for (e, c), v in groups.items() if e == emp), key=lambda cv: (-cv[1][1], cv[0])
        )
        out += [(emp, c, v[0], v[1]) for c, v in cats]
        n, t = sum(v[0] for _, v in cats), sum(v[1] for _, v in cats)
        out.append((emp, "SUBTOTAL", n, t))
        all_n, all_t = all_n + n, all_t + t
    out.append(("TOTAL", "", all_n, all_t))
    return out


def test_report(expected):
    path = Path("/app/report/expense_report.csv")
    assert path.is_file(), f"{path} is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["employee", "category", "count", "total_usd"]
        got = [r for r in reader if r]
    assert len(got) == len(expected), f"{len(got)} rows, expected {len(expected)}"
    for g, (emp, cat, n, total) in zip(got, expected):
        assert len(g) == 4, g
        assert g[0] == emp and g[1] == cat and g[2] == str(n), (g, emp, cat, n)
        assert re.fullmatch(r"-?\d+\.\d\d", g[3]), f"{g[3]!r} is not written with 2 decimals"
        want = total.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        assert abs(Decimal(g[3]) - want) <= Decimal("0.01") and abs(
            Decimal(g[3]) - total
        ) < Decimal("0.006"), (g, str(total))
