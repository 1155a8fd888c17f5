#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
import numpy as np
import pandas as pd

df = pd.read_csv("/app/data/prices.csv").sort_values(["ticker", "date"])
answer = {}
for tk, g in df.groupby("ticker"):
    close = g["close"].to_numpy()
    ret = pd.Series(close[1:] / close[:-1] - 1, index=g["date"].to_numpy()[1:])
    dd = close / np.maximum.accumulate(close) - 1
    answer[tk] = {
        "total_return": round(float(close[-1] / close[0] - 1), 6),
        "annualized_volatility": round(float(ret.std(ddof=1) * np.sqrt(252)), 6),
        "max_drawdown": round(float(dd.min()), 6),
        "best_day": ret.idxmax(),
        "worst_day": ret.idxmin(),
    }
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
