#!/bin/bash
set -euo pipefail
mkdir -p /app/report
python3 - <<'PY'
import csv, json

rates = json.load(open("/app/data/rates.json"))["to_usd"]
groups = {}
with open("/app/data/expenses.csv", newline="") as fh:
    for r in csv.DictReader(fh):
        if r["status"] != "approved":
            continue
        g = groups.setdefault((r["employee"], r["category"]), [0, 0.0])
        g[0] += 1
        g[1] += float(r["amount"]) * rates[r["currency"]]
rows = []
all_n, all_t = 0, 0.0
for emp in sorted({e for e, _ in groups}):
    cats = sorted(((c, v) for (e, c), v in groups.items() if e == emp), key=lambda cv: (-cv[1][1], cv[0]))
    n = sum(v[0] for _, v in cats)
    t = sum(v[1] for _, v in cats)
    rows += [[emp, c, v[0], f"{v[1]:.2f}"] for c, v in cats]
    rows.append([emp, "SUBTOTAL", n, f"{t:.2f}"])
    all_n += n
    all_t += t
rows.append(["TOTAL", "", all_n, f"{all_t:.2f}"])
with open("/app/report/expense_report.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["employee", "category", "count", "total_usd"])
    w.writerows(rows)
PY
