"""The EUR booking records and their summary equal the ones the booking rules give."""

import json
import math
from pathlib import Path

EXPECTED = json.loads(Path("/tests/expected.json").read_text())


def number(value):
    assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    return float(value)


def test_orders():
    got = json.loads(Path("/app/out/orders-eur.json").read_text())
    want = EXPECTED["orders"]
    assert [o["order_id"] for o in got] == [o["order_id"] for o in want]
    for g, w in zip(got, want):
        assert (g["date"], g["customer"]) == (w["date"], w["customer"]), w["order_id"]
        assert math.isclose(number(g["amount_eur"]), w["amount_eur"], abs_tol=0.005), w["order_id"]


def test_summary():
    got = json.loads(Path("/app/out/summary.json").read_text())
    want = EXPECTED["summary"]
    assert got["orders"] == want["orders"]
    assert math.isclose(number(got["total_eur"]), want["total_eur"], abs_tol=0.005)
    assert sorted(got["by_customer"]) == sorted(want["by_customer"])
    for customer, total in want["by_customer"].items():
        assert math.isclose(number(got["by_customer"][customer]), total, abs_tol=0.005), customer
