#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import load_workbook

wb = load_workbook("/app/invoice.xlsx")
ws = wb["Invoice"]
for r in range(8, 20):
    ws[f"E{r}"] = f"=B{r}*C{r}*(1-D{r})"
ws["E21"] = "=SUM(E8:E19)"
ws["E22"] = "=ROUND(E21*$B$4,2)"
ws["E23"] = "=E21+E22"
for r in list(range(8, 20)) + [21, 22, 23]:
    ws[f"E{r}"].number_format = "#,##0.00"
wb.save("/app/invoice.xlsx")
PY
