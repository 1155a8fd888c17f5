#!/bin/bash
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import copy, json, re
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
import docx

q = json.load(open("/app/data/quote.json"))
PH = re.compile(r"\{\{(\w+)\}\}")

def money(x):
    return f"{x:,.2f}"

def fill(paragraph, values):
    for run in paragraph.runs:
        if "{{" in run.text:
            run.text = PH.sub(lambda m: values[m.group(1)], run.text)
    if "{{" in paragraph.text:
        raise SystemExit(f"placeholder split over runs in {paragraph.text!r}")

d = date.fromisoformat(q["valid_until"])
amounts = [float(Decimal(repr(l["qty"] * l["unit_price"])).quantize(Decimal("0.01"), ROUND_HALF_UP))
           for l in q["lines"]]
values = {"quote_no": q["quote_no"], "client": q["client"], "prepared_by": q["prepared_by"],
          "valid_until": f"{d.day} {d.strftime('%B')} {d.year}", "total": money(sum(amounts))}

doc = docx.Document("/app/templates/quote_template.docx")
table = doc.tables[0]
template_tr = table.rows[1]._tr
anchor = template_tr
for line, amount in zip(q["lines"], amounts):
    tr = copy.deepcopy(template_tr)
    anchor.addnext(tr)
    anchor = tr
    row = docx.table._Row(tr, table)
    row_values = {"item": line["item"], "qty": str(line["qty"]), "unit_price": money(line["unit_price"]),
                  "amount": money(amount)}
    for cell in row.cells:
        for p in cell.paragraphs:
            fill(p, row_values)
template_tr.getparent().remove(template_tr)
for p in doc.paragraphs:
    fill(p, values)
for row in table.rows:
    for cell in row.cells:
        for p in cell.paragraphs:
            fill(p, values)
doc.save("/app/out/quote.docx")
PY
