#!/bin/bash
# Reference solution: find the policy and the incidents with the search tool, then apply the
# policy (severity, the 72-hour notice rule, minutes clipped to February, highest percentage per
# customer) to every incident report and the customers' CSV.
set -euo pipefail
search --top 3 SLA credit enterprise policy
search --top 12 --lines 1 "Impact start" > /dev/null
csv2json --types /app/data/customers.csv -o /tmp/customers.json
python3 - <<'PY'
import datetime as dt, glob, json, re
from decimal import Decimal, ROUND_HALF_UP
T = lambda s: dt.datetime.strptime(s, "%Y-%m-%d %H:%M")
lo, hi = T("2026-02-01 00:00"), T("2026-03-01 00:00")
minutes, counted = {}, []
for path in sorted(glob.glob("/app/docs/incidents/*.md")):
    text = open(path).read()
    field = lambda name: re.search(rf"- {name}: (.+)", text).group(1).strip()
    sev = field("Severity")
    start, end = T(field("Impact start").removesuffix(" UTC")), T(field("Impact end").removesuffix(" UTC"))
    if sev not in ("SEV1", "SEV2"):
        continue
    notice = re.search(r"notice sent (\d{4}-\d\d-\d\d \d\d:\d\d) UTC", text)
    if notice and start - T(notice.group(1)) >= dt.timedelta(hours=72):
        continue
    a, b = max(start, lo), min(end, hi)
    if b <= a:
        continue
    mins = int((b - a).total_seconds() // 60)
    counted.append(re.search(r"^# (INC-\d+)", text, re.M).group(1))
    for svc in field("Services affected").split(","):
        minutes[svc.strip()] = minutes.get(svc.strip(), 0) + mins
def pct(m):
    return 0 if m < 30 else 5 if m < 120 else 10 if m < 240 else 25
credits = {}
for c in json.load(open("/tmp/customers.json")):
    p = max(pct(minutes.get(s, 0)) for s in c["services"].split(";")) if c["plan"] == "enterprise" else 0
    credits[c["customer"]] = float((Decimal(str(c["monthly_fee_eur"])) * p / 100).quantize(Decimal("0.01"), ROUND_HALF_UP))
total = float(sum(Decimal(str(v)) for v in credits.values()))
json.dump({"month": "2026-02", "counted_incidents": sorted(counted), "outage_minutes": minutes,
           "credits_eur": credits, "total_eur": total}, open("/app/answer.json", "w"), indent=1)
PY
cat /app/answer.json
