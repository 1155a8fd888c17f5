#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import pandas as pd

df = pd.read_csv("/app/data/transactions.csv", dtype={"card_last4": str})
q = df.groupby("merchant_category")["amount"].quantile([0.25, 0.75]).unstack()
q.columns = ["q1", "q3"]
q["lower_fence"] = q["q1"] - 1.5 * (q["q3"] - q["q1"])
q["upper_fence"] = q["q3"] + 1.5 * (q["q3"] - q["q1"])
df = df.join(q[["lower_fence", "upper_fence"]], on="merchant_category")
low = df["amount"] < df["lower_fence"]
high = df["amount"] > df["upper_fence"]
out = df[low | high].copy()
out["direction"] = ["low" if l else "high" for l in low[low | high]]
out[["lower_fence", "upper_fence"]] = out[["lower_fence", "upper_fence"]].round(4)
out = out.sort_values("txn_id")
out[["txn_id", "merchant_category", "amount", "direction", "lower_fence", "upper_fence"]].to_csv(
    "/app/outliers.csv", index=False)
PY
