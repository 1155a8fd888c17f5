"""Verifier: /app/letters holds exactly one letter per member of the pristine CSV
(tests/pristine/data), each the pristine template rendered with values computed here: every
paragraph and header equal, styles equal, no placeholder left, bold values where the
placeholder was bold."""

import csv
from datetime import date
from pathlib import Path

import pytest
from docxcheck import assert_bold, assert_rendered, body_blocks, load

MONTHS = [
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
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def members():
    with open("/tests/pristine/data/members.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def values_for(m):
    d = date.fromisoformat(m["due_date"])
    out = dict(m)
    out["amount_due"] = "EUR " + f"{float(m['amount_due']):,.2f}"
    out["due_date"] = f"{DAYS[d.weekday()]}, {d.day} {MONTHS[d.month - 1]} {d.year}"
    return out


@pytest.fixture(scope="module")
def template():
    return load("/tests/pristine/templates/reminder_template.docx")


def test_exact_files():
    folder = Path("/app/letters")
    assert folder.is_dir(), "/app/letters is missing"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{m['member_id']}.docx" for m in members()
    )


@pytest.mark.parametrize("member", members(), ids=lambda m: m["member_id"])
def test_letter(member, template):
    values = values_for(member)
    name = f"{member['member_id']}.docx"
    doc = load(f"/app/letters/{name}")
    assert_rendered(doc, template, values, name)
    paras = [obj for kind, obj in body_blocks(doc) if kind == "p"]
    tparas = [obj for kind, obj in body_blocks(template) if kind == "p"]
    bold = 0
    for p, t in zip(paras, tparas):
        for run in t.runs:
            if run.bold and run.text.startswith("{{") and run.text.endswith("}}"):
                assert_bold(p, values[run.text[2:-2]], f"{name}: {t.text!r}")
                bold += 1
    assert bold == 2
