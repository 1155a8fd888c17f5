"""/app/answer.json holds February 2026's SLA credits as the policy computes them."""

import json
import math
from pathlib import Path

import pytest

EXPECTED = json.loads(Path("/tests/expected.json").read_text())


@pytest.fixture(scope="module")
def answer():
    data = json.loads(Path("/app/answer.json").read_text())
    assert isinstance(data, dict)
    return data


def number(value):
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    return float(value)


def test_month(answer):
    assert answer["month"] == "2026-02"


def test_counted_incidents(answer):
    assert answer["counted_incidents"] == EXPECTED["counted_incidents"]


def test_outage_minutes(answer):
    got = {k: v for k, v in answer["outage_minutes"].items() if v}
    assert {k: number(v) for k, v in got.items()} == EXPECTED["outage_minutes"]


def test_credits(answer):
    assert sorted(answer["credits_eur"]) == sorted(EXPECTED["credits_eur"])
    for customer, want in EXPECTED["credits_eur"].items():
        assert math.isclose(number(answer["credits_eur"][customer]), want, abs_tol=0.005), customer


def test_total(answer):
    assert math.isclose(number(answer["total_eur"]), EXPECTED["total_eur"], abs_tol=0.005)
