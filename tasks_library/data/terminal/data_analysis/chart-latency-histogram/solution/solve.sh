#!/bin/bash
set -euo pipefail
mkdir -p /app/chart
python3 - <<'PY'
import json
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

df = pd.read_csv("/app/data/latency.csv")
lat = df["latency_ms"].to_numpy()
edges = np.arange(0, 1001, 50)
counts = [int(((lat >= a) & (lat < a + 50)).sum()) for a in edges[:-1]] + [int((lat >= 1000).sum())]
rows = [(int(a), str(int(a) + 50), c) for a, c in zip(edges[:-1], counts)] + [(1000, "", counts[-1])]
pd.DataFrame(rows, columns=["bin_start", "bin_end", "count"]).to_csv("/app/chart/latency_hist.csv", index=False)
stats = {"count": int(len(lat))}
for p in (50, 95, 99):
    stats[f"p{p}"] = round(float(np.percentile(lat, p)), 2)
stats["p95_by_endpoint"] = {e: round(float(np.percentile(g, 95)), 2) for e, g in df.groupby("endpoint")["latency_ms"]}
json.dump(stats, open("/app/chart/latency_stats.json", "w"), indent=2)
fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
labels = [str(a) for a in edges[:-1]] + [">=1000"]
ax.bar(range(21), counts, width=0.9, color="tab:blue")
ax.set_xticks(range(21), labels, rotation=60)
ax.set_title("Request latency")
ax.set_xlabel("latency (ms), bin start")
ax.set_ylabel("requests")
fig.tight_layout()
fig.savefig("/app/chart/latency_hist.png")
PY
