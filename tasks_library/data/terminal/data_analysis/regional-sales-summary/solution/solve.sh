#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
import json
import pandas as pd

df = pd.read_csv("/app/data/sales.csv")
cancelled_share = (df["status"] == "cancelled").mean()
df = df[df["status"] == "completed"].copy()
df["revenue"] = df["units"] * df["unit_price"] * (1 - df["discount_pct"] / 100)
by_region = df.groupby("region")["revenue"].sum()
top = df.groupby(["region", "category"])["revenue"].sum().reset_index()
top = top.sort_values("revenue", ascending=False).drop_duplicates("region")
month = df.groupby(df["order_date"].str[:7])["revenue"].sum().idxmax()
answer = {
    "revenue_by_region": {r: round(float(v), 2) for r, v in by_region.items()},
    "completed_orders_by_region": {r: int(v) for r, v in df.groupby("region").size().items()},
    "top_category_by_region": dict(zip(top["region"], top["category"])),
    "average_order_value": round(float(df["revenue"].mean()), 2),
    "best_month": month,
    "cancelled_share": round(float(cancelled_share), 4),
}
with open("/app/answer.json", "w") as fh:
    json.dump(answer, fh, indent=2)
PY
