"""Verifier: /app/answer.json against per-ticker figures recomputed in plain Python from the
pristine copy of the prices in /tests/data."""

import csv
import json
import math
import statistics
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def expected():
    series = {}
    with open("/tests/data/prices.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            series.setdefault(r["ticker"], []).append((r["date"], float(r["close"])))
    out = {}
    for tk, rows in series.items():
        rows.sort()
        closes = [c for _, c in rows]
        rets = [(rows[i][0], closes[i] / closes[i - 1] - 1) for i in range(1, len(rows))]
        peak, mdd = closes[0], 0.0
        for c in closes:
            peak = max(peak, c)
            mdd = min(mdd, c / peak - 1)
        ranked = sorted(rets, key=lambda dr: dr[1])
        assert ranked[-1][1] - ranked[-2][1] > 1e-6 and ranked[1][1] - ranked[0][1] > 1e-6
        out[tk] = {
            "total_return": closes[-1] / closes[0] - 1,
            "annualized_volatility": statistics.stdev(r for _, r in rets) * math.sqrt(252),
            "max_drawdown": mdd,
            "best_day": ranked[-1][0],
            "worst_day": ranked[0][0],
        }
    return out


def test_answer(expected):
    path = Path("/app/answer.json")
    assert path.is_file(), "/app/answer.json is missing"
    got = json.loads(path.read_text())
    assert isinstance(got, dict) and set(got) == set(expected)
    for tk, want in expected.items():
        g = got[tk]
        assert isinstance(g, dict) and set(g) == set(want), tk
        for key in ("total_return", "annualized_volatility", "max_drawdown"):
            v = g[key]
            assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            assert abs(v - want[key]) <= 2e-6, (tk, key, v, want[key])
        assert g["best_day"] == want["best_day"] and g["worst_day"] == want["worst_day"], tk
