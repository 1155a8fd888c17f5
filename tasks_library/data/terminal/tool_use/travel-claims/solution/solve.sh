#!/bin/bash
# Reference solution: version 4 of the policy (not the superseded v3), the mileage rate by the
# trip's first day (0.30, or 0.34 from 2026-04-01), travel days at 75 %, the hotel cap times the
# nights, the 60-day deadline, rounding per component.
set -euo pipefail
search --top 3 per diem hotel cap
search --top 3 mileage rate
csv2json --types /app/data/claims.csv -o /tmp/claims.json
mkdir -p /app/out
python3 - <<'PY'
import datetime as dt, json
from decimal import Decimal as D, ROUND_HALF_UP
q = lambda x: D(x).quantize(D("0.01"), ROUND_HALF_UP)
PER_DIEM = {"Berlin": 28, "Paris": 36, "London": 40, "New York": 55}
CAP = {"Berlin": 140, "Paris": 180, "London": 200, "New York": 260}
day = dt.date.fromisoformat
claims, total = [], D(0)
for c in sorted(json.load(open("/tmp/claims.json")), key=lambda c: c["claim_id"]):
    first, last = day(c["first_day"]), day(c["last_day"])
    if (day(c["submitted"]) - last).days > 60:
        claims.append({"claim_id": c["claim_id"], "status": "rejected", "per_diem": 0, "hotel": 0, "mileage": 0, "total": 0})
        continue
    rate = D(PER_DIEM.get(c["city"], 24))
    days = (last - first).days + 1
    travel_days = 1 if days == 1 else 2
    per_diem = q(rate * (days - travel_days) + rate * D("0.75") * travel_days)
    hotel = q(min(D(str(c["hotel_eur"])), D(CAP.get(c["city"], 120)) * c["nights"]))
    mileage = q(D(c["car_km"]) * (D("0.34") if first >= dt.date(2026, 4, 1) else D("0.30")))
    t = per_diem + hotel + mileage
    total += t
    claims.append({"claim_id": c["claim_id"], "status": "approved", "per_diem": float(per_diem),
                   "hotel": float(hotel), "mileage": float(mileage), "total": float(t)})
json.dump({"claims": claims, "total_eur": float(total)}, open("/app/out/claims.json", "w"), indent=1)
PY
python3 -c 'import json; print(json.load(open("/app/out/claims.json"))["total_eur"])'
