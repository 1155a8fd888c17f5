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

df = pd.read_csv("/app/data/daily_sales.csv")
df["month"] = df["date"].str[:7]
months = [f"2024-{m:02d}" for m in range(1, 13)]
table = df.pivot_table(index="month", columns="product_line", values="revenue", aggfunc="sum")
table = table.reindex(months).fillna(0.0)
lines = sorted(table.columns)
spec = {
    "type": "bar",
    "title": "Monthly revenue per product line, 2024",
    "x_label": "Month",
    "y_label": "Revenue",
    "x": months,
    "series": [{"name": l, "values": [round(float(v), 2) for v in table[l]]} for l in lines],
}
fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
width = 0.8 / len(lines)
x = np.arange(len(months))
for i, s in enumerate(spec["series"]):
    ax.bar(x + i * width - 0.4 + width / 2, s["values"], width, label=s["name"])
ax.set_xticks(x, months, rotation=45)
ax.set_title(spec["title"])
ax.set_xlabel(spec["x_label"])
ax.set_ylabel(spec["y_label"])
ax.legend()
fig.tight_layout()
fig.savefig("/app/chart/monthly_revenue.png")
json.dump(spec, open("/app/chart/monthly_revenue.json", "w"), indent=2)
PY
