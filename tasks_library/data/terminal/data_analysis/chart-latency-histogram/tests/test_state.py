"""Verifier: the histogram's counts (/app/chart/latency_hist.csv) and the percentiles against
values recomputed in plain Python from the pristine copy of the data in /tests/data, and the PNG
is a real chart: axes, text and bars for the bins (21: at least 14 seen, the tail's are small)."""

import csv
import json
import math
from pathlib import Path

import pytest
from pngcheck import check_png


def percentile(values, p):
    s = sorted(values)
    pos = (len(s) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@pytest.fixture(scope="module")
def data():
    with open("/tests/data/latency.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [(r["endpoint"], float(r["latency_ms"])) for r in rows]


def test_histogram_csv(data):
    want = [[str(a), str(a + 50), 0] for a in range(0, 1000, 50)] + [["1000", "", 0]]
    for _, v in data:
        want[min(int(v // 50), 20)][2] += 1
    assert sum(1 for _, v in data if v % 50 == 0) > 10  # values on the edges do occur
    path = Path("/app/chart/latency_hist.csv")
    assert path.is_file(), f"{path} is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["bin_start", "bin_end", "count"]
        got = [r for r in reader if r]
    assert len(got) == 21
    for g, (start, end, count) in zip(got, want):
        assert len(g) == 3, g
        assert int(g[0]) == int(start) and g[2].strip() == str(count), (g, start, count)
        assert (g[1].strip() == "") if end == "" else (int(g[1]) == int(end)), (g, end)


def test_stats(data):
    path = Path("/app/chart/latency_stats.json")
    assert path.is_file(), f"{path} is missing"
    got = json.loads(path.read_text())
    assert isinstance(got, dict) and set(got) == {"count", "p50", "p95", "p99", "p95_by_endpoint"}
    values = [v for _, v in data]
    assert got["count"] == len(values)
    for p in (50, 95, 99):
        assert abs(got[f"p{p}"] - percentile(values, p)) <= 0.0051, p
    per = {}
    for e, v in data:
        per.setdefault(e, []).append(v)
    assert isinstance(got["p95_by_endpoint"], dict) and set(got["p95_by_endpoint"]) == set(per)
    for e, vs in per.items():
        assert abs(got["p95_by_endpoint"][e] - percentile(vs, 95)) <= 0.0051, e


def test_png():
    check_png("/app/chart/latency_hist.png", 600, 400, 1, min_bars=14)
