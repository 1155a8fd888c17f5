"""/app/out/bills.json holds every customer's March bill as the tariff computes it."""

import json
import math
from pathlib import Path

import pytest

EXPECTED = json.loads(Path("/tests/expected.json").read_text())


def number(value):
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    return float(value)


@pytest.fixture(scope="module")
def bills():
    return json.loads(Path("/app/out/bills.json").read_text())


def test_customers(bills):
    assert sorted(bills) == sorted(EXPECTED)


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_bill(bills, cid):
    got, want = bills[cid], EXPECTED[cid]
    assert math.isclose(number(got["kwh"]), want["kwh"], abs_tol=0.05), "kwh"
    for key in ("energy", "discount", "standing", "net", "vat", "gross"):
        assert math.isclose(number(got[key]), want[key], abs_tol=0.005), key
