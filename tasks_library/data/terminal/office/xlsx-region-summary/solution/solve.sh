#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import load_workbook
from openpyxl.styles import Font

wb = load_workbook("/app/sales.xlsx")
orders = wb["Orders"]
regions = sorted({orders[f"B{r}"].value for r in range(2, orders.max_row + 1)})
ws = wb.create_sheet("Summary")
for col, h in zip("ABCD", ["Region", "Orders", "Revenue", "Average order"]):
    ws[f"{col}1"] = h
    ws[f"{col}1"].font = Font(bold=True)
for i, region in enumerate(regions, start=2):
    ws[f"A{i}"] = region
    ws[f"B{i}"] = f"=COUNTIF(Orders!$B$2:$B$181,A{i})"
    ws[f"C{i}"] = f"=SUMIF(Orders!$B$2:$B$181,A{i},Orders!$E$2:$E$181)"
    ws[f"D{i}"] = f"=C{i}/B{i}"
ws["A7"] = "Total"
ws["B7"] = "=SUM(B2:B6)"
ws["C7"] = "=SUM(C2:C6)"
ws["D7"] = "=C7/B7"
for col in "ABCD":
    ws[f"{col}7"].font = Font(bold=True)
for r in range(2, 8):
    for col in "CD":
        ws[f"{col}{r}"].number_format = "#,##0.00"
wb.save("/app/sales.xlsx")
PY
