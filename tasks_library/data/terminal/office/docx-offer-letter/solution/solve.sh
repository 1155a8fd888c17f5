#!/bin/bash
set -euo pipefail
mkdir -p /app/out
python3 - <<'PY'
import json, re
from datetime import date
import docx

rec = json.load(open("/app/data/candidate.json"))

def long_date(s):
    d = date.fromisoformat(s)
    return f"{d.day} {d.strftime('%B')} {d.year}"

values = {k: str(v) for k, v in rec.items()}
for k in ("letter_date", "start_date", "reply_by"):
    values[k] = long_date(rec[k])
values["salary"] = f"GBP {rec['salary']:,.0f}"

PH = re.compile(r"\{\{(\w+)\}\}")

def fill(paragraph):
    runs = paragraph.runs
    texts = [r.text for r in runs]
    starts, pos = [], 0
    for t in texts:
        starts.append(pos)
        pos += len(t)
    def locate(i):
        for k in range(len(texts) - 1, -1, -1):
            if starts[k] <= i and (len(texts[k]) or starts[k] < i):
                if i < starts[k] + len(texts[k]):
                    return k, i - starts[k]
        raise ValueError(i)
    full = "".join(texts)
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
        if r.text != t:
            r.text = t

def walk(paragraphs, tables):
    for p in paragraphs:
        fill(p)
    for t in tables:
        for row in t.rows:
            for cell in row.cells:
                walk(cell.paragraphs, cell.tables)

doc = docx.Document("/app/templates/offer_template.docx")
walk(doc.paragraphs, doc.tables)
for s in doc.sections:
    for hf in (s.header, s.footer):
        walk(hf.paragraphs, hf.tables)
doc.save("/app/out/offer_letter.docx")
PY
