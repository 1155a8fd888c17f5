"""Verifier: /app/hourly.csv and /app/answer.json against buckets recomputed in plain Python from
the pristine copy of the readings in /tests/data."""

import csv
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def expected():
    buckets = {}
    with open("/tests/data/readings.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            t = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").replace(minute=0, second=0)
            buckets.setdefault((row["sensor_id"], t), []).append(float(row["temperature_c"]))
    first = min(t for _, t in buckets)
    last = max(t for _, t in buckets)
    hours = []
    t = first
    while t <= last:
        hours.append(t)
        t += timedelta(hours=1)
    sensors = sorted({s for s, _ in buckets})
    table, summary = [], {"empty_hours": {}, "longest_gap_hours": {}, "warmest_hour": {}}
    for s in sensors:
        run = best = empty = 0
        warm = None
        for h in hours:
            vals = buckets.get((s, h), [])
            mean = sum(vals) / len(vals) if vals else None
            table.append((s, h.strftime("%Y-%m-%d %H:00"), mean, len(vals)))
            run = 0 if vals else run + 1
            best = max(best, run)
            empty += not vals
            if vals and (warm is None or mean > warm[0]):
                warm = (mean, h)
        summary["empty_hours"][s] = empty
        summary["longest_gap_hours"][s] = best
        summary["warmest_hour"][s] = warm[1].strftime("%Y-%m-%d %H:00")
    return table, summary


def test_hourly_csv(expected):
    table, _ = expected
    path = Path("/app/hourly.csv")
    assert path.is_file(), "/app/hourly.csv is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["sensor_id", "hour", "mean_temp", "readings"]
        got = [r for r in reader if r]
    assert len(got) == len(table)
    for row, (s, h, mean, n) in zip(got, table):
        assert len(row) == 4, row
        assert (row[0], row[1]) == (s, h), (row, s, h)
        assert int(float(row[3])) == n and float(row[3]) == n, (row, n)
        if mean is None:
            assert row[2].strip() == "", row
        else:
            v = float(row[2])
            assert math.isfinite(v) and abs(v - mean) <= 0.0051, (row, mean)


def test_answer(expected):
    _, summary = expected
    path = Path("/app/answer.json")
    assert path.is_file(), "/app/answer.json is missing"
    got = json.loads(path.read_text())
    assert isinstance(got, dict) and set(got) == set(summary)
    for key, want in summary.items():
        assert got[key] == want, (key, got[key], want)
