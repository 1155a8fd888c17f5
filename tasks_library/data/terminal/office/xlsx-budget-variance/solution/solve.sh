#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import load_workbook
from openpyxl.formatting.rule import CellIsRule
from openpyxl.styles import Font

wb = load_workbook("/app/budget.xlsx")
ws = wb["Budget"]
ws["D1"], ws["E1"] = "Variance", "Variance %"
ws["D1"].font = ws["E1"].font = Font(bold=True)
for r in range(2, 12):
    ws[f"D{r}"] = f"=C{r}-B{r}"
    ws[f"E{r}"] = f"=D{r}/B{r}"
ws["A12"] = "Total"
ws["A12"].font = Font(bold=True)
for col in "BCD":
    ws[f"{col}12"] = f"=SUM({col}2:{col}11)"
ws["E12"] = "=D12/B12"
for r in range(2, 13):
    for col in "BCD":
        ws[f"{col}{r}"].number_format = "#,##0.00"
    ws[f"E{r}"].number_format = "0.0%"
ws.conditional_formatting.add("D2:D11", CellIsRule(operator="lessThan", formula=["0"], font=Font(color="9C0006")))
wb.save("/app/budget.xlsx")
PY
