"""Verifier: /app/out/offer_letter.docx against the pristine template (tests/pristine) rendered
with values computed here from the pristine candidate record: every paragraph (body, table,
header, footer) equal, styles equal, no placeholder left, bold values where the placeholder was
bold."""

import json
from datetime import date

import pytest
from docxcheck import assert_bold, assert_rendered, body_blocks, load


def long_date(s):
    d = date.fromisoformat(s)
    months = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
    return f"{d.day} {months[d.month - 1]} {d.year}"


@pytest.fixture(scope="module")
def values():
    rec = json.load(open("/tests/pristine/data/candidate.json"))
    out = {k: str(v) for k, v in rec.items()}
    for k in ("letter_date", "start_date", "reply_by"):
        out[k] = long_date(rec[k])
    out["salary"] = "GBP " + f"{int(rec['salary']):,}"
    return out


@pytest.fixture(scope="module")
def docs():
    return load("/app/out/offer_letter.docx"), load("/tests/pristine/templates/offer_template.docx")


def test_rendered(docs, values):
    doc, template = docs
    assert_rendered(doc, template, values, "offer_letter.docx")


def test_bold_values(docs, values):
    doc, template = docs
    paras = [obj for kind, obj in body_blocks(doc) if kind == "p"]
    tparas = [obj for kind, obj in body_blocks(template) if kind == "p"]
    checked = 0
    for p, t in zip(paras, tparas):
        for run in t.runs:
            if run.bold and run.text.startswith("{{") and run.text.endswith("}}"):
                assert_bold(p, values[run.text[2:-2]], f"paragraph {t.text!r}")
                checked += 1
    assert checked >= 3
