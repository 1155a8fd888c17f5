#!/bin/bash
set -euo pipefail
python3 - <<'PY'
from openpyxl import load_workbook
from openpyxl.styles import Font

wb = load_workbook("/app/grades.xlsx")
ws = wb["Scores"]
ws["E1"], ws["F1"] = "Weighted", "Grade"
ws["E1"].font = ws["F1"].font = Font(bold=True)
for r in range(2, 32):
    ws[f"E{r}"] = f"=ROUND(B{r}*Weights!$B$2+C{r}*Weights!$B$3+D{r}*Weights!$B$4,1)"
    ws[f"F{r}"] = f'=IF(E{r}>=90,"A",IF(E{r}>=80,"B",IF(E{r}>=70,"C",IF(E{r}>=60,"D","F"))))'
st = wb.create_sheet("Stats")
st["A1"], st["B1"] = "Measure", "Value"
st["A1"].font = st["B1"].font = Font(bold=True)
rows = [("Average", "=ROUND(AVERAGE(Scores!E2:E31),2)"), ("Highest", "=MAX(Scores!E2:E31)"),
        ("Lowest", "=MIN(Scores!E2:E31)")]
rows += [(f"Count {g}", f'=COUNTIF(Scores!$F$2:$F$31,"{g}")') for g in "ABCDF"]
for i, (label, formula) in enumerate(rows, start=2):
    st[f"A{i}"], st[f"B{i}"] = label, formula
wb.save("/app/grades.xlsx")
PY
