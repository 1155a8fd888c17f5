"""Document checks shared by the Word tasks' verifiers: a document's blocks (body paragraphs,
tables and their cells' paragraphs, headers, footers) in order, and their comparison with the
pristine template rendered with the expected values."""

import re
from pathlib import Path

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def load(path):
    path = Path(path)
    assert path.is_file(), f"{path} is missing"
    return docx.Document(str(path))


def _table_blocks(table, where):
    out = []
    for i, row in enumerate(table.rows):
        for j, cell in enumerate(row.cells):
            for k, p in enumerate(cell.paragraphs):
                out.append((f"{where} row {i} cell {j} paragraph {k}", p))
            for t, inner in enumerate(cell.tables):
                out.extend(_table_blocks(inner, f"{where} row {i} cell {j} table {t}"))
    return out


def body_blocks(doc):
    """[(where, kind, object)] for the body, in order: ('p', Paragraph) or ('table', Table)."""
    out = []
    for child in doc.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            out.append(("p", Paragraph(child, doc)))
        elif tag == "tbl":
            out.append(("table", Table(child, doc)))
    return out


def paragraphs(doc):
    """[(where, Paragraph)]: every paragraph of the document, tables' and headers' included."""
    out = []
    for n, (kind, obj) in enumerate(body_blocks(doc)):
        if kind == "p":
            out.append((f"body paragraph {n}", obj))
        else:
            out.extend(_table_blocks(obj, f"body table {n}"))
    for s, section in enumerate(doc.sections):
        for part in ("header", "footer"):
            hf = getattr(section, part)
            for k, p in enumerate(hf.paragraphs):
                out.append((f"section {s} {part} paragraph {k}", p))
            for t, table in enumerate(hf.tables):
                out.extend(_table_blocks(table, f"section {s} {part} table {t}"))
    return out


def render(text, values):
    def sub(m):
        assert m.group(1) in values, f"the verifier has no value for {m.group(0)}"
        return values[m.group(1)]

    return PLACEHOLDER.sub(sub, text)


def all_text(doc):
    return "\n".join(p.text for _, p in paragraphs(doc))


def assert_no_placeholder(doc, name):
    text = all_text(doc)
    assert "{{" not in text and "}}" not in text, f"{name} still holds a placeholder"


def assert_rendered(doc, template, values, name):
    """Same structure as the template; every paragraph's text is the template's with the values
    in place of the placeholders; the same paragraph styles."""
    got, want = body_blocks(doc), body_blocks(template)
    assert [k for k, _ in got] == [k for k, _ in want], (
        f"{name}: the body's paragraphs and tables differ from the template's"
    )
    gp, wp = paragraphs(doc), paragraphs(template)
    assert len(gp) == len(wp), f"{name}: {len(gp)} paragraphs, the template has {len(wp)}"
    for (where, g), (_, w) in zip(gp, wp):
        expected = render(w.text, values)
        assert g.text == expected, f"{name}, {where}: {g.text!r} != {expected!r}"
        assert g.style.name == w.style.name, (
            f"{name}, {where}: style {g.style.name} != {w.style.name}"
        )
    assert_no_placeholder(doc, name)


def assert_bold(paragraph, value, where):
    """The characters of ``value`` in ``paragraph`` are all in bold runs."""
    chars = []
    for run in paragraph.runs:
        chars.extend((ch, bool(run.bold)) for ch in run.text)
    text = "".join(ch for ch, _ in chars)
    i = text.find(value)
    assert i >= 0, f"{where}: {value!r} not found"
    assert all(b for _, b in chars[i : i + len(value)]), (
        f"{where}: {value!r} is not bold as in the template"
    )
