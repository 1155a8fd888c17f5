#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json, re
import pandas as pd

df = pd.read_csv("/app/data/contacts.csv", dtype=str, keep_default_na=False)
n_in = len(df)
df["id"] = df["id"].astype(int)
df["email"] = df["email"].str.strip().str.lower()
valid = df["email"].str.contains("@", regex=False)
df = df[valid].copy()
n_valid = len(df)
df = df.sort_values(["email", "updated_at", "id"], ascending=[True, False, True])
df = df.drop_duplicates("email", keep="first")
df["full_name"] = df["full_name"].map(lambda s: " ".join(s.split()))

def phone(p):
    d = re.sub(r"\D", "", p)
    if len(d) == 11 and d.startswith("1"):
        d = d[1:]
    return f"{d[:3]}-{d[3:6]}-{d[6:]}" if len(d) == 10 else ""

df["phone"] = df["phone"].map(phone)
df["city"] = df["city"].str.strip()
df = df.sort_values("id")
df[["id", "full_name", "email", "phone", "city", "updated_at"]].to_csv("/app/contacts_clean.csv", index=False)
json.dump({"input_rows": n_in, "dropped_invalid_email": n_in - n_valid,
           "duplicates_removed": n_valid - len(df), "output_rows": len(df)},
          open("/app/answer.json", "w"), indent=2)
PY
