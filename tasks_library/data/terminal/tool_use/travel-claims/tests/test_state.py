"""/app/out/claims.json equals the policy's result for every claim."""

import json
import math
from pathlib import Path

import pytest

EXPECTED = json.loads(Path("/tests/expected.json").read_text())


def number(value):
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    return float(value)


@pytest.fixture(scope="module")
def answer():
    return json.loads(Path("/app/out/claims.json").read_text())


def test_claim_ids(answer):
    assert [c["claim_id"] for c in answer["claims"]] == [c["claim_id"] for c in EXPECTED["claims"]]


@pytest.mark.parametrize("want", EXPECTED["claims"], ids=lambda c: c["claim_id"])
def test_claim(answer, want):
    got = next(c for c in answer["claims"] if c["claim_id"] == want["claim_id"])
    assert got["status"] == want["status"]
    for key in ("per_diem", "hotel", "mileage", "total"):
        assert math.isclose(number(got[key]), want[key], abs_tol=0.005), key


def test_total(answer):
    assert math.isclose(number(answer["total_eur"]), EXPECTED["total_eur"], abs_tol=0.005)
