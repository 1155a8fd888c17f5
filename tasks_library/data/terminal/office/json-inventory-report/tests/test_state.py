"""Verifier: /app/report/inventory.json against the report rebuilt here from the pristine stock
and warehouse files (tests/pristine/data): keys and their order, warehouse order, counts, skus,
and values within a cent."""

import csv
import json
from pathlib import Path

import pytest

KEYS = [
    "code",
    "name",
    "city",
    "sku_count",
    "total_units",
    "total_value",
    "top_sku",
    "out_of_stock",
]


@pytest.fixture(scope="module")
def expected():
    whs = json.load(open("/tests/pristine/data/warehouses.json"))
    lines = {}
    with open("/tests/pristine/data/stock.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            lines.setdefault(r["warehouse"], []).append(
                (r["sku"], int(r["qty"]), float(r["unit_cost"]))
            )
    out = []
    for code, info in whs.items():
        ls = lines[code]
        ranked = sorted(ls, key=lambda line: (-line[1] * line[2], line[0]))
        out.append(
            {
                "code": code,
                "name": info["name"],
                "city": info["city"],
                "sku_count": sum(q > 0 for _, q, _ in ls),
                "total_units": sum(q for _, q, _ in ls),
                "total_value": sum(q * c for _, q, c in ls),
                "top_sku": ranked[0][0],
                "out_of_stock": sorted(s for s, q, _ in ls if q == 0),
            }
        )
    out.sort(key=lambda w: -w["total_value"])
    values = [w["total_value"] for w in out]
    assert all(a - b > 1 for a, b in zip(values, values[1:]))
    assert any(w["out_of_stock"] for w in out)
    return {"warehouses": out, "grand_total_value": sum(values)}


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def test_report(expected):
    path = Path("/app/report/inventory.json")
    assert path.is_file(), f"{path} is missing"
    got = json.loads(path.read_text())
    assert isinstance(got, dict) and list(got) == ["currency", "warehouses", "grand_total_value"]
    assert got["currency"] == "EUR"
    assert (
        num(got["grand_total_value"])
        and abs(got["grand_total_value"] - expected["grand_total_value"]) <= 0.0051
    )
    ws = got["warehouses"]
    assert isinstance(ws, list)
    assert [w.get("code") for w in ws] == [w["code"] for w in expected["warehouses"]], (
        "warehouse order"
    )
    for g, w in zip(ws, expected["warehouses"]):
        assert list(g) == KEYS, (w["code"], list(g))
        for k in ("code", "name", "city", "top_sku", "out_of_stock"):
            assert g[k] == w[k], (w["code"], k, g[k], w[k])
        for k in ("sku_count", "total_units"):
            assert num(g[k]) and g[k] == w[k], (w["code"], k, g[k], w[k])
        assert num(g["total_value"]) and abs(g["total_value"] - w["total_value"]) <= 0.0051, (
            w["code"],
            g["total_value"],
        )
