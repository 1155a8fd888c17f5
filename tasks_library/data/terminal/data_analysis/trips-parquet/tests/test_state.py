"""Verifier: /app/answer.json against figures recomputed in plain Python (rows read with pyarrow)
from the pristine copy of the Parquet file in /tests/data."""

import json
import math
import statistics
from pathlib import Path

import pyarrow.parquet as pq
import pytest

KEYS = {
    "trip_count",
    "invalid_trips",
    "median_duration_min",
    "fare_per_km_by_zone",
    "busiest_pickup_hour",
    "card_share",
}


@pytest.fixture(scope="module")
def expected():
    rows = pq.read_table("/tests/data/trips.parquet").to_pylist()
    valid = [r for r in rows if r["dropoff_at"] > r["pickup_at"] and r["distance_km"] > 0]
    fare, dist, hours = {}, {}, {}
    for r in valid:
        z = r["pickup_zone"]
        fare[z] = fare.get(z, 0.0) + r["fare"]
        dist[z] = dist.get(z, 0.0) + r["distance_km"]
        h = r["pickup_at"].hour
        hours[h] = hours.get(h, 0) + 1
    ranked = sorted(hours.items(), key=lambda kv: -kv[1])
    assert ranked[0][1] > ranked[1][1]
    return {
        "trip_count": len(rows),
        "invalid_trips": len(rows) - len(valid),
        "median_duration_min": statistics.median(
            (r["dropoff_at"] - r["pickup_at"]).total_seconds() / 60 for r in valid
        ),
        "fare_per_km_by_zone": {z: fare[z] / dist[z] for z in fare},
        "busiest_pickup_hour": ranked[0][0],
        "card_share": sum(r["payment_type"] == "card" for r in valid) / len(valid),
    }


@pytest.fixture(scope="module")
def answer():
    path = Path("/app/answer.json")
    assert path.is_file(), "/app/answer.json is missing"
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def close(got, want, tol):
    return (
        isinstance(got, (int, float))
        and not isinstance(got, bool)
        and math.isfinite(got)
        and abs(got - want) <= tol
    )


def test_keys(answer):
    assert set(answer) == KEYS


def test_counts(answer, expected):
    for key in ("trip_count", "invalid_trips", "busiest_pickup_hour"):
        assert answer[key] == expected[key], key


def test_median_and_share(answer, expected):
    assert close(answer["median_duration_min"], expected["median_duration_min"], 0.0051)
    assert close(answer["card_share"], expected["card_share"], 0.00006)


def test_fare_per_km(answer, expected):
    got = answer["fare_per_km_by_zone"]
    assert isinstance(got, dict) and set(got) == set(expected["fare_per_km_by_zone"])
    for z, v in expected["fare_per_km_by_zone"].items():
        assert close(got[z], v, 0.00006), (z, got[z], v)
