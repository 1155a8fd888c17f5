#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import pandas as pd

users = pd.read_csv("/app/data/users.csv")
events = pd.read_csv("/app/data/events.csv")
users["cohort"] = pd.PeriodIndex(users["signup_date"], freq="M")
events["month"] = pd.PeriodIndex(events["event_date"], freq="M")
active = events[["user_id", "month"]].drop_duplicates().merge(users[["user_id", "cohort"]], on="user_id")
active["k"] = (active["month"] - active["cohort"]).apply(lambda d: d.n)
last = pd.Period("2024-06", freq="M")
rows = []
for cohort, group in users.groupby("cohort"):
    size = len(group)
    row = {"cohort": str(cohort), "size": size}
    for k in range(6):
        if cohort + k > last:
            row[f"m{k}"] = ""
        else:
            n = active[(active["cohort"] == cohort) & (active["k"] == k)]["user_id"].nunique()
            row[f"m{k}"] = f"{n / size:.4f}"
    rows.append(row)
pd.DataFrame(rows).to_csv("/app/retention.csv", index=False)
PY
