#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import pandas as pd

df = pd.read_parquet("/app/data/trips.parquet")
n = len(df)
valid = (df["dropoff_at"] > df["pickup_at"]) & (df["distance_km"] > 0)
v = df[valid].copy()
v["zone"] = v["pickup_zone"].astype(str)
dur = (v["dropoff_at"] - v["pickup_at"]).dt.total_seconds() / 60
sums = v.groupby("zone")[["fare", "distance_km"]].sum()
answer = {
    "trip_count": int(n),
    "invalid_trips": int((~valid).sum()),
    "median_duration_min": round(float(dur.median()), 2),
    "fare_per_km_by_zone": {z: round(float(r.fare / r.distance_km), 4) for z, r in sums.iterrows()},
    "busiest_pickup_hour": int(v["pickup_at"].dt.hour.value_counts().idxmax()),
    "card_share": round(float((v["payment_type"].astype(str) == "card").mean()), 4),
}
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
