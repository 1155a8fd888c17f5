#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import load_workbook
from openpyxl.styles import Font, PatternFill

wb = load_workbook("/app/inventory.xlsx")
ws = wb["Stock"]
ws["F1"], ws["G1"] = "Status", "Stock value"
header = PatternFill(fill_type="solid", start_color="D9D9D9", end_color="D9D9D9")
alert = PatternFill(fill_type="solid", start_color="FFC7CE", end_color="FFC7CE")
for col in "ABCDEFG":
    ws[f"{col}1"].font = Font(bold=True)
    ws[f"{col}1"].fill = header
for r in range(2, 42):
    ws[f"F{r}"] = f'=IF(C{r}<D{r},"REORDER","OK")'
    ws[f"G{r}"] = f"=C{r}*E{r}"
    ws[f"G{r}"].number_format = "#,##0.00"
    if ws[f"C{r}"].value < ws[f"D{r}"].value:
        for col in "ABCDEFG":
            ws[f"{col}{r}"].fill = alert
ws.freeze_panes = "A2"
wb.save("/app/inventory.xlsx")
PY
