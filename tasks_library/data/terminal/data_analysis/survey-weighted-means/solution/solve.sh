#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import pandas as pd

df = pd.read_csv("/app/data/survey.csv", dtype={"satisfaction": str}, keep_default_na=False)
df["score"] = pd.to_numeric(df["satisfaction"].str.strip(), errors="coerce")
ok = df[df["score"].notna()].copy()
ok["ws"] = ok["weight"] * ok["score"]
ok["wsat"] = ok["weight"] * (ok["score"] >= 4)
g = ok.groupby("age_group")[["ws", "weight"]].sum()
r = ok.groupby("region")[["wsat", "weight"]].sum()
answer = {
    "answered": int(len(ok)),
    "missing": int(len(df) - len(ok)),
    "weighted_mean_by_age_group": {k: round(float(v.ws / v.weight), 3) for k, v in g.iterrows()},
    "satisfied_share_by_region": {k: round(float(v.wsat / v.weight), 4) for k, v in r.iterrows()},
    "overall_weighted_mean": round(float(ok["ws"].sum() / ok["weight"].sum()), 4),
    "overall_unweighted_mean": round(float(ok["score"].mean()), 4),
}
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
