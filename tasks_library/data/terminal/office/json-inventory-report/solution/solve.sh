#!/bin/bash
set -euo pipefail
mkdir -p /app/report
python3 - <<'PY'
import csv, json

whs = json.load(open("/app/data/warehouses.json"))
lines = {}
with open("/app/data/stock.csv", newline="") as fh:
    for r in csv.DictReader(fh):
        lines.setdefault(r["warehouse"], []).append((r["sku"], int(r["qty"]), float(r["unit_cost"])))
out = []
grand = 0.0
for code, info in whs.items():
    ls = lines.get(code, [])
    value = sum(q * c for _, q, c in ls)
    grand += value
    top = min(ls, key=lambda l: (-l[1] * l[2], l[0]))[0] if ls else None
    out.append({"code": code, "name": info["name"], "city": info["city"],
                "sku_count": sum(1 for _, q, _ in ls if q > 0), "total_units": sum(q for _, q, _ in ls),
                "total_value": round(value, 2), "top_sku": top,
                "out_of_stock": sorted(s for s, q, _ in ls if q == 0)})
out.sort(key=lambda w: -w["total_value"])
json.dump({"currency": "EUR", "warehouses": out, "grand_total_value": round(grand, 2)},
          open("/app/report/inventory.json", "w"), indent=2)
PY
