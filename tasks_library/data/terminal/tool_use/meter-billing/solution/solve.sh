#!/bin/bash
# Reference solution: the billing period from the readings note (1st to last day of March),
# the replacement's final and installation readings for the customer whose meter changed, the
# 2026 banded tariff (not 2025's), the social-tariff list as of March, rounding as the tariff says.
set -euo pipefail
search --top 3 tariff 2026 band standing charge
search --top 3 meter replacement installation reading
search --top 2 social tariff enrolled
mkdir -p /app/out
python3 - <<'PY'
import csv, json, re
from decimal import Decimal as D, ROUND_HALF_UP
q = lambda x: x.quantize(D("0.01"), ROUND_HALF_UP)
read = {}
for r in csv.DictReader(open("/app/data/readings.csv")):
    read[(r["customer"], r["meter"], r["date"])] = D(r["reading_kwh"])
repl = {}
text = open("/app/docs/field-ops/meter-replacements-2026-03.md").read()
for cust, old, final, new, install in re.findall(r"\| 2026-03-\d\d \| (C-\d+) \| (\S+) \| ([\d.]+) \| (\S+) \| ([\d.]+) \|", text):
    repl[cust] = (old, D(final), new, D(install))
social = set(re.findall(r"^- (C-\d+)", open("/app/docs/billing/social-tariff.md").read(), re.M))
bills = {}
for c in csv.DictReader(open("/app/data/customers.csv")):
    cid = c["customer"]
    if cid in repl:
        old, final, new, install = repl[cid]
        kwh = (final - read[(cid, old, "2026-03-01")]) + (read[(cid, new, "2026-03-31")] - install)
    else:
        meter = next(m for (cc, m, d) in read if cc == cid and d == "2026-03-01")
        kwh = read[(cid, meter, "2026-03-31")] - read[(cid, meter, "2026-03-01")]
    energy = q(min(kwh, D(200)) * D("0.2840") + max(min(kwh, D(500)) - 200, D(0)) * D("0.2460")
               + max(kwh - 500, D(0)) * D("0.2190"))
    discount = q(energy * D("0.20")) if cid in social else D("0.00")
    net = energy - discount + D("9.50")
    vat = q(net * D("0.19"))
    bills[cid] = {"kwh": float(kwh), "energy": float(energy), "discount": float(discount),
                  "standing": 9.5, "net": float(net), "vat": float(vat), "gross": float(net + vat)}
json.dump(bills, open("/app/out/bills.json", "w"), indent=1)
PY
cat /app/out/bills.json | head -12
