"""Verifier: /app/answer.json against figures recomputed from the pristine copies in /tests/data."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

KEYS = {
    "revenue_by_country",
    "avg_order_by_segment",
    "orphan_orders",
    "customers_without_orders",
    "top_customers",
}


@pytest.fixture(scope="module")
def expected():
    cust = pd.read_csv("/tests/data/customers.csv")
    orders = pd.read_csv("/tests/data/orders.csv")
    number = {int(cid.split("-")[1]): cid for cid in cust["customer_id"]}
    country = dict(zip(cust["customer_id"], cust["country"]))
    segment = dict(zip(cust["customer_id"], cust["segment"]))
    by_country, by_segment, per_customer = {}, {}, {}
    orphans = 0
    for no, amount in zip(orders["cust_no"], orders["amount"]):
        cid = number.get(int(no))
        if cid is None:
            orphans += 1
            continue
        by_country[country[cid]] = by_country.get(country[cid], 0.0) + amount
        by_segment.setdefault(segment[cid], []).append(amount)
        per_customer[cid] = per_customer.get(cid, 0.0) + amount
    ranked = sorted(per_customer.items(), key=lambda kv: (-kv[1], kv[0]))
    assert ranked[4][1] - ranked[5][1] > 0.01
    return {
        "revenue_by_country": by_country,
        "avg_order_by_segment": {k: sum(v) / len(v) for k, v in by_segment.items()},
        "orphan_orders": orphans,
        "customers_without_orders": len(number) - len(per_customer),
        "top_customers": [cid for cid, _ in ranked[:5]],
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


@pytest.mark.parametrize("key", ["revenue_by_country", "avg_order_by_segment"])
def test_mappings(answer, expected, key):
    got, want = answer[key], expected[key]
    assert isinstance(got, dict) and set(got) == set(want)
    for k, v in want.items():
        assert close(got[k], v, 0.011), (key, k, got[k], v)


def test_counts(answer, expected):
    assert answer["orphan_orders"] == expected["orphan_orders"]
    assert answer["customers_without_orders"] == expected["customers_without_orders"]


def test_top_customers(answer, expected):
    assert answer["top_customers"] == expected["top_customers"]
