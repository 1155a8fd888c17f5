"""Verifier: the chart's data (/app/chart/monthly_revenue.json) against monthly totals recomputed
from the pristine copy of the sales in /tests/data, and the PNG is a real chart: axes, text, the
three product lines' colours and bars for the months (12 per line: at least 24 seen)."""

import csv
import json
import math
from pathlib import Path

import pytest
from pngcheck import check_png

MONTHS = [f"2024-{m:02d}" for m in range(1, 13)]


@pytest.fixture(scope="module")
def expected():
    totals = {}
    with open("/tests/data/daily_sales.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            line = totals.setdefault(r["product_line"], {m: 0.0 for m in MONTHS})
            line[r["date"][:7]] += float(r["revenue"])
    return {name: [totals[name][m] for m in MONTHS] for name in sorted(totals)}


@pytest.fixture(scope="module")
def spec():
    path = Path("/app/chart/monthly_revenue.json")
    assert path.is_file(), f"{path} is missing"
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def test_spec_shape(spec):
    assert set(spec) == {"type", "title", "x_label", "y_label", "x", "series"}
    assert spec["type"] == "bar"
    for key in ("title", "x_label", "y_label"):
        assert isinstance(spec[key], str) and spec[key].strip()
    assert spec["x"] == MONTHS


def test_series_values(spec, expected):
    series = spec["series"]
    assert isinstance(series, list)
    assert [s.get("name") for s in series] == list(expected)
    for s in series:
        values = s["values"]
        assert isinstance(values, list) and len(values) == 12
        for got, want in zip(values, expected[s["name"]]):
            assert (
                isinstance(got, (int, float)) and math.isfinite(got) and abs(got - want) <= 0.011
            ), (s["name"], got, want)


def test_png():
    check_png("/app/chart/monthly_revenue.png", 600, 400, 3, min_bars=24)
