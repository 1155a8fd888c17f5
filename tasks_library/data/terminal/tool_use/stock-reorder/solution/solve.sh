#!/bin/bash
# Reference solution: the current policy (not the withdrawn 2024 one), the critical items' 14
# safety days, per-item lead times where a supplier lists them, open POs in the stock position,
# whole packs and minimum orders. Exact arithmetic (usage has one decimal).
set -euo pipefail
search --top 2 reorder point safety stock
search --top 3 lead time pack size minimum order
mkdir -p /app/out
python3 - <<'PY'
import csv, glob, math, re
from decimal import Decimal as D
stock = list(csv.DictReader(open("/app/data/stock.csv")))
po = {}
for r in csv.DictReader(open("/app/data/open-purchase-orders.csv")):
    po[r["sku"]] = po.get(r["sku"], 0) + int(r["quantity"])
critical = set(re.findall(r"^- (MRO-\d+)", open("/app/docs/procurement/critical-items.md").read(), re.M))
terms = {}
for path in glob.glob("/app/docs/suppliers/*.md"):
    text = open(path).read()
    std = int(re.search(r"Standard lead time: (\d+)", text).group(1))
    for sku, pack, moq, lead in re.findall(r"^\| (MRO-\d+) \| [^|]+ \| (\d+) \| (\d+) \| ([^|]+) \|", text, re.M):
        lead = lead.strip()
        terms[sku] = (int(pack), int(moq), std if lead == "standard" else int(lead.split()[0]))
with open("/app/out/reorder.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["sku", "supplier", "quantity"])
    for r in sorted(stock, key=lambda r: r["sku"]):
        pack, moq, lead = terms[r["sku"]]
        u = D(r["avg_daily_usage"])
        safety = 14 if r["sku"] in critical else 7
        position = int(r["on_hand"]) + po.get(r["sku"], 0)
        if position <= u * (lead + safety):
            packs = math.ceil((u * (lead + safety + 30) - position) / pack)
            w.writerow([r["sku"], r["supplier"], max(packs * pack, moq)])
PY
cat /app/out/reorder.csv
