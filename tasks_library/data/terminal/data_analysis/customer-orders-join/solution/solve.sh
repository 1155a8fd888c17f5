#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import pandas as pd

cust = pd.read_csv("/app/data/customers.csv")
orders = pd.read_csv("/app/data/orders.csv")
cust["cust_no"] = cust["customer_id"].str.replace("CUST-", "", regex=False).astype(int)
joined = orders.merge(cust, on="cust_no", how="left", indicator=True)
orphans = int((joined["_merge"] == "left_only").sum())
joined = joined[joined["_merge"] == "both"]
totals = joined.groupby("customer_id")["amount"].sum().reset_index()
totals = totals.sort_values(["amount", "customer_id"], ascending=[False, True])
answer = {
    "revenue_by_country": {k: round(float(v), 2) for k, v in joined.groupby("country")["amount"].sum().items()},
    "avg_order_by_segment": {k: round(float(v), 2) for k, v in joined.groupby("segment")["amount"].mean().items()},
    "orphan_orders": orphans,
    "customers_without_orders": int((~cust["cust_no"].isin(orders["cust_no"])).sum()),
    "top_customers": totals["customer_id"].head(5).tolist(),
}
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
