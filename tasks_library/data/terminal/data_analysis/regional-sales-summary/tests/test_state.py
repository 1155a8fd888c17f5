"""Verifier: /app/answer.json against figures recomputed from the pristine copy in /tests/data."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

ANSWER = Path("/app/answer.json")
KEYS = {
    "revenue_by_region",
    "completed_orders_by_region",
    "top_category_by_region",
    "average_order_value",
    "best_month",
    "cancelled_share",
}


@pytest.fixture(scope="module")
def expected():
    df = pd.read_csv("/tests/data/sales.csv")
    cancelled_share = float((df["status"] == "cancelled").mean())
    df = df[df["status"] == "completed"].copy()
    df["revenue"] = df["units"] * df["unit_price"] * (1 - df["discount_pct"] / 100)
    cat = df.groupby(["region", "category"])["revenue"].sum()
    top = {}
    for region, group in cat.groupby(level=0):
        ranked = group.sort_values(ascending=False)
        assert ranked.iloc[0] - ranked.iloc[1] > 1.0  # the data has no near tie
        top[region] = ranked.index[0][1]
    months = df.groupby(df["order_date"].str[:7])["revenue"].sum().sort_values(ascending=False)
    assert months.iloc[0] - months.iloc[1] > 1.0
    return {
        "revenue_by_region": df.groupby("region")["revenue"].sum().to_dict(),
        "completed_orders_by_region": df.groupby("region").size().to_dict(),
        "top_category_by_region": top,
        "average_order_value": float(df["revenue"].mean()),
        "best_month": months.index[0],
        "cancelled_share": cancelled_share,
    }


@pytest.fixture(scope="module")
def answer():
    assert ANSWER.is_file(), "/app/answer.json is missing"
    data = json.loads(ANSWER.read_text())
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


def test_revenue_by_region(answer, expected):
    got = answer["revenue_by_region"]
    assert set(got) == set(expected["revenue_by_region"])
    for region, want in expected["revenue_by_region"].items():
        assert close(got[region], want, 0.011), (region, got[region], want)


def test_orders_by_region(answer, expected):
    got = answer["completed_orders_by_region"]
    assert {k: v for k, v in got.items()} == {
        k: int(v) for k, v in expected["completed_orders_by_region"].items()
    }


def test_top_category(answer, expected):
    assert answer["top_category_by_region"] == expected["top_category_by_region"]


def test_scalars(answer, expected):
    assert close(answer["average_order_value"], expected["average_order_value"], 0.011)
    assert answer["best_month"] == expected["best_month"]
    assert close(answer["cancelled_share"], expected["cancelled_share"], 0.00051)
