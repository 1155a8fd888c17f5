#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import pandas as pd

df = pd.read_csv("/app/data/readings.csv", parse_dates=["timestamp"])
df["hour"] = df["timestamp"].dt.floor("h")
hours = pd.date_range(df["hour"].min(), df["hour"].max(), freq="h")
sensors = sorted(df["sensor_id"].unique())
agg = df.groupby(["sensor_id", "hour"])["temperature_c"].agg(["mean", "size"])
full = agg.reindex(pd.MultiIndex.from_product([sensors, hours], names=["sensor_id", "hour"]))
full["readings"] = full["size"].fillna(0).astype(int)
full["mean_temp"] = full["mean"].round(2)
out = full.reset_index()[["sensor_id", "hour", "mean_temp", "readings"]]
out["hour"] = out["hour"].dt.strftime("%Y-%m-%d %H:00")
out.to_csv("/app/hourly.csv", index=False)

answer = {"empty_hours": {}, "longest_gap_hours": {}, "warmest_hour": {}}
for s, g in out.groupby("sensor_id"):
    empty = (g["readings"] == 0).tolist()
    run = best = 0
    for e in empty:
        run = run + 1 if e else 0
        best = max(best, run)
    answer["empty_hours"][s] = int(sum(empty))
    answer["longest_gap_hours"][s] = best
    means = full.loc[s, "mean"]
    answer["warmest_hour"][s] = means.idxmax().strftime("%Y-%m-%d %H:00")
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
