#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
from datetime import date
from openpyxl import Workbook
from openpyxl.styles import Font

with open("/app/data/transactions.csv", newline="") as fh:
    rows = list(csv.DictReader(fh))
rows.sort(key=lambda r: (r["date"], r["id"]))
wb = Workbook()
ws = wb.active
ws.title = "Transactions"
ws.append(["Date", "ID", "Customer", "Category", "Amount"])
for c in ws[1]:
    c.font = Font(bold=True)
for r in rows:
    ws.append([date.fromisoformat(r["date"]), r["id"], r["customer"], r["category"], float(r["amount"])])
n = len(rows) + 1
for i in range(2, n + 1):
    ws[f"A{i}"].number_format = "yyyy-mm-dd"
    ws[f"E{i}"].number_format = "#,##0.00"
ws.auto_filter.ref = f"A1:E{n}"
ws.freeze_panes = "A2"
for col in "ABCDE":
    ws.column_dimensions[col].width = 16
tot = wb.create_sheet("Totals")
tot["A1"], tot["B1"] = "Category", "Amount"
tot["A1"].font = tot["B1"].font = Font(bold=True)
cats = sorted({r["category"] for r in rows})
for i, cat in enumerate(cats, start=2):
    tot[f"A{i}"] = cat
    tot[f"B{i}"] = f"=SUMIF(Transactions!$D$2:$D${n},A{i},Transactions!$E$2:$E${n})"
last = len(cats) + 2
tot[f"A{last}"] = "Total"
tot[f"B{last}"] = f"=SUM(B2:B{last - 1})"
for i in range(2, last + 1):
    tot[f"B{i}"].number_format = "#,##0.00"
wb.save("/app/transactions.xlsx")
PY
