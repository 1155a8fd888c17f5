#!/bin/bash
# Reference solution: the export's format and the booking rules from the corpus, the March rates
# with Treasury's GBP correction, csv2json for the semicolon/decimal-comma export, then per-order
# conversion (divide by units-per-EUR, round half up to the cent) and the sums.
set -euo pipefail
search --top 2 export format decimal
search --top 3 booking rate March GBP correction
mkdir -p /app/out
csv2json --delimiter ';' --decimal-comma --types /app/data/orders-export.csv -o /tmp/orders.json
python3 - <<'PY'
import json, re
from decimal import Decimal, ROUND_HALF_UP
def rates(path):
    return {c: Decimal(r) for c, r in re.findall(r"\| ([A-Z]{3}) \| ([\d.]+) \|", open(path).read())}
book = {"2026-02": rates("/app/docs/treasury/fx-rates-2026-02.md"),
        "2026-03": rates("/app/docs/treasury/fx-rates-2026-03.md")}
book["2026-03"]["GBP"] = Decimal("0.8517")  # notice-2026-03-15
out = []
for o in json.load(open("/tmp/orders.json")):
    if o["status"] == "cancelled":
        continue
    amount = Decimal(str(o["amount"]))
    eur = amount if o["currency"] == "EUR" else (amount / book[o["date"][:7]][o["currency"]]).quantize(Decimal("0.01"), ROUND_HALF_UP)
    out.append({"order_id": o["order_id"], "date": o["date"], "customer": o["customer"], "amount_eur": float(eur)})
out.sort(key=lambda r: r["order_id"])
by = {}
for r in out:
    by[r["customer"]] = by.get(r["customer"], Decimal(0)) + Decimal(str(r["amount_eur"]))
json.dump(out, open("/app/out/orders-eur.json", "w"), indent=1)
json.dump({"orders": len(out), "total_eur": float(sum(by.values())),
           "by_customer": {k: float(v) for k, v in sorted(by.items())}}, open("/app/out/summary.json", "w"), indent=1)
PY
cat /app/out/summary.json
