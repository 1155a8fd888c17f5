#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import Workbook, load_workbook
from openpyxl.styles import Font

rows = []
for region in ("north", "south", "west"):
    ws = load_workbook(f"/app/data/{region}.xlsx")["Q1"]
    for product, jan, feb, mar in ws.iter_rows(min_row=2, values_only=True):
        if product is not None:
            rows.append((region.capitalize(), product, jan, feb, mar))
rows.sort(key=lambda r: (r[0], r[1]))
wb = Workbook()
ws = wb.active
ws.title = "All"
ws.append(["Region", "Product", "Jan", "Feb", "Mar", "Total"])
for i, r in enumerate(rows, start=2):
    ws.append(list(r) + [f"=SUM(C{i}:E{i})"])
n = len(rows) + 1
bp = wb.create_sheet("By product")
bp.append(["Product", "Regions", "Q1 total"])
products = sorted({r[1] for r in rows})
for i, p in enumerate(products, start=2):
    bp.append([p, f"=COUNTIF(All!$B$2:$B${n},A{i})", f"=SUMIF(All!$B$2:$B${n},A{i},All!$F$2:$F${n})"])
last = len(products) + 2
bp[f"A{last}"] = "Total"
bp[f"C{last}"] = f"=SUM(C2:C{last - 1})"
for sheet in (ws, bp):
    for c in sheet[1]:
        c.font = Font(bold=True)
wb.save("/app/consolidated.xlsx")
PY
