#!/bin/bash
set -euo pipefail
mkdir -p /app/letters
python3 - <<'PY'
import csv, re
from datetime import date
import docx

PH = re.compile(r"\{\{(\w+)\}\}")

def fill(paragraph, values):
    # placeholders here sit inside single runs; join runs per paragraph to be safe
    runs = paragraph.runs
    texts = [r.text for r in runs]
    full = "".join(texts)
    if "{{" not in full:
        return
    bounds, pos = [], 0
    for t in texts:
        bounds.append((pos, pos + len(t)))
        pos += len(t)
    def locate(i):
        for k, (a, b) in enumerate(bounds):
            if a <= i < b:
                return k, i - a
        raise ValueError(i)
    for m in reversed(list(PH.finditer(full))):
        (rs, os_), (re_, oe) = locate(m.start()), locate(m.end() - 1)
        value = values[m.group(1)]
        if rs == re_:
            texts[rs] = texts[rs][:os_] + value + texts[rs][oe + 1:]
        else:
            texts[rs] = texts[rs][:os_] + value
            for k in range(rs + 1, re_):
                texts[k] = ""
            texts[re_] = texts[re_][oe + 1:]
    for r, t in zip(runs, texts):
        r.text = t

with open("/app/data/members.csv", newline="") as fh:
    members = list(csv.DictReader(fh))
for m in members:
    d = date.fromisoformat(m["due_date"])
    values = dict(m)
    values["amount_due"] = f"EUR {float(m['amount_due']):,.2f}"
    values["due_date"] = f"{d.strftime('%A')}, {d.day} {d.strftime('%B')} {d.year}"
    doc = docx.Document("/app/templates/reminder_template.docx")
    for p in doc.paragraphs:
        fill(p, values)
    for s in doc.sections:
        for p in s.header.paragraphs + s.footer.paragraphs:
            fill(p, values)
    doc.save(f"/app/letters/{m['member_id']}.docx")
PY
