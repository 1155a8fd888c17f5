"""Verifier: /app/answer.json against weighted figures recomputed in plain Python from the
pristine copy of the survey in /tests/data."""

import csv
import json
import math
from pathlib import Path

import pytest

KEYS = {
    "answered",
    "missing",
    "weighted_mean_by_age_group",
    "satisfied_share_by_region",
    "overall_weighted_mean",
    "overall_unweighted_mean",
}


@pytest.fixture(scope="module")
def expected():
    with open("/tests/data/survey.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ok = [
        (r["age_group"], r["region"], int(r["satisfaction"]), float(r["weight"]))
        for r in rows
        if r["satisfaction"].strip() in {"1", "2", "3", "4", "5"}
    ]
    assert len(rows) - len(ok) == sum(r["satisfaction"].strip() in {"", "NA", "n/a"} for r in rows)
    by_age, by_region = {}, {}
    for age, region, s, w in ok:
        a = by_age.setdefault(age, [0.0, 0.0])
        a[0] += w * s
        a[1] += w
        b = by_region.setdefault(region, [0.0, 0.0])
        b[0] += w * (s >= 4)
        b[1] += w
    return {
        "answered": len(ok),
        "missing": len(rows) - len(ok),
        "weighted_mean_by_age_group": {k: v[0] / v[1] for k, v in by_age.items()},
        "satisfied_share_by_region": {k: v[0] / v[1] for k, v in by_region.items()},
        "overall_weighted_mean": sum(w * s for *_, s, w in ok) / sum(w for *_, w in ok),
        "overall_unweighted_mean": sum(s for *_, s, _ in ok) / len(ok),
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


def test_keys_and_counts(answer, expected):
    assert set(answer) == KEYS
    assert answer["answered"] == expected["answered"]
    assert answer["missing"] == expected["missing"]


@pytest.mark.parametrize(
    "key,tol", [("weighted_mean_by_age_group", 0.00051), ("satisfied_share_by_region", 0.00006)]
)
def test_groups(answer, expected, key, tol):
    got = answer[key]
    assert isinstance(got, dict) and set(got) == set(expected[key])
    for k, v in expected[key].items():
        assert close(got[k], v, tol), (key, k, got[k], v)


def test_overall(answer, expected):
    assert close(answer["overall_weighted_mean"], expected["overall_weighted_mean"], 0.00006)
    assert close(answer["overall_unweighted_mean"], expected["overall_unweighted_mean"], 0.00006)
