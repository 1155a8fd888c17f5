"""Verifier: /app/out/quote.docx against the pristine template and record (tests/pristine): the
paragraphs outside the table rendered and unchanged otherwise, the table's header row, one row
per line (copies of the template row: cell count, right-aligned figures) with the figures
recomputed here, the total row, no placeholder left, bold kept."""

import json
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

import pytest
from docx.enum.text import WD_ALIGN_PARAGRAPH
from docxcheck import assert_bold, assert_no_placeholder, body_blocks, load, render

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


def money(x):
    return f"{x:,.2f}"


@pytest.fixture(scope="module")
def quote():
    return json.load(open("/tests/pristine/data/quote.json"))


@pytest.fixture(scope="module")
def docs():
    return load("/app/out/quote.docx"), load("/tests/pristine/templates/quote_template.docx")


@pytest.fixture(scope="module")
def expected(quote):
    lines = []
    for line in quote["lines"]:
        amount = Decimal(repr(line["qty"])) * Decimal(repr(line["unit_price"]))
        amount = amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        lines.append([line["item"], str(line["qty"]), money(line["unit_price"]), money(amount)])
    total = sum(Decimal(row[3].replace(",", "")) for row in lines)
    d = date.fromisoformat(quote["valid_until"])
    values = {
        "quote_no": quote["quote_no"],
        "client": quote["client"],
        "prepared_by": quote["prepared_by"],
        "valid_until": f"{d.day} {MONTHS[d.month - 1]} {d.year}",
        "total": money(total),
    }
    return lines, values


def test_paragraphs(docs, expected):
    doc, template = docs
    _, values = expected
    got, want = body_blocks(doc), body_blocks(template)
    assert [k for k, _ in got] == [k for k, _ in want], "the body's paragraphs and tables differ"
    for (kind, g), (_, w) in zip(got, want):
        if kind == "p":
            assert g.text == render(w.text, values), (g.text, w.text)
            assert g.style.name == w.style.name
    assert_no_placeholder(doc, "quote.docx")
    first = [obj for kind, obj in got if kind == "p"][1]
    assert_bold(first, values["quote_no"], "the quote number")


def test_table(docs, expected):
    doc, template = docs
    lines, values = expected
    assert len(doc.tables) == 1
    table, ttable = doc.tables[0], template.tables[0]
    rows = table.rows
    assert len(rows) == len(lines) + 2, f"{len(rows)} rows, expected {len(lines) + 2}"
    assert [c.text for c in rows[0].cells] == [c.text for c in ttable.rows[0].cells]
    for i, line in enumerate(lines, start=1):
        cells = rows[i].cells
        assert len(cells) == 4
        assert [c.text for c in cells] == line, (i, [c.text for c in cells], line)
        for c in cells[1:]:
            assert c.paragraphs[0].alignment == WD_ALIGN_PARAGRAPH.RIGHT, (
                f"row {i}: figures not right-aligned"
            )
    last = rows[-1].cells
    assert [c.text for c in last] == [render(c.text, values) for c in ttable.rows[2].cells]
    assert_bold(last[3].paragraphs[0], values["total"], "the total")
