"""Deterministic inputs for Crucible's office terminal tasks: workbooks, templates, records.

Each input is written under <task>/environment/<path> and copied, pristine, to
<task>/tests/pristine/<path>.

Not run at import or at run time: the generated files are committed. To regenerate them
(byte for byte), in a virtual environment with the set's pins (Python 3.11 or later):

    pip install pandas==2.2.3 numpy==2.1.3 pyarrow==18.1.0 openpyxl==3.1.5 \
        python-docx==1.1.2 lxml==5.3.0
    python tasks_library/data/terminal/office/generate_inputs.py
"""

import csv
import io
import json
import random
import re
import shutil
import sys
import zipfile
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import docx
from docx.enum.text import WD_ALIGN_PARAGRAPH
from openpyxl import Workbook
from openpyxl.styles import Font

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
FIXED_TIME = (2026, 1, 15, 9, 0, 0)

FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Liam",
    "Maya",
    "Noor",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
    "Uma",
    "Victor",
    "Wen",
    "Xavier",
    "Yara",
    "Zane",
]
LAST = [
    "Abbott",
    "Baker",
    "Castro",
    "Dunn",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinlan",
    "Rossi",
    "Silva",
    "Tanaka",
    "Usman",
    "Varga",
    "Weber",
    "Xu",
    "Young",
    "Zhou",
]


def target(task, rel):
    p = ROOT / task / "environment" / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def mirror(task, rel):
    src = ROOT / task / "environment" / rel
    dst = ROOT / task / "tests" / "pristine" / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def stable_zip(path):
    """Rewrite an OOXML zip with fixed timestamps and order, so regenerating gives equal bytes."""
    with zipfile.ZipFile(path) as z:
        items = [(i.filename, z.read(i.filename)) for i in z.infolist()]

    items = [
        (
            n,
            re.sub(
                rb"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)",
                rb"\g<1>2026-01-15T09:00:00Z\g<2>",
                d,
            )
            if n == "docProps/core.xml"
            else d,
        )
        for n, d in items
    ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in items:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 15, 9, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    path.write_bytes(buf.getvalue())


def save_wb(wb, task, rel):
    wb.properties.created = datetime(*FIXED_TIME)
    wb.properties.modified = datetime(*FIXED_TIME)
    wb.properties.creator = "Crucible"
    p = target(task, rel)
    wb.save(p)
    stable_zip(p)
    mirror(task, rel)


def save_doc(doc, task, rel):
    cp = doc.core_properties
    cp.created = cp.modified = datetime(*FIXED_TIME)
    cp.author = cp.last_modified_by = "Crucible"
    cp.revision = 1
    p = target(task, rel)
    doc.save(p)
    stable_zip(p)
    mirror(task, rel)


def save_text(task, rel, text):
    target(task, rel).write_text(text)
    mirror(task, rel)


BOLD = Font(bold=True)


def invoice():
    rng = random.Random(11)
    wb = Workbook()
    ws = wb.active
    ws.title = "Invoice"
    ws["A1"] = "INVOICE"
    ws["A1"].font = Font(bold=True, size=16)
    ws["A3"], ws["B3"] = "Invoice no.", "INV-2026-0142"
    ws["A4"], ws["B4"] = "Tax rate", 0.0825
    ws["B4"].number_format = "0.00%"
    ws["A5"], ws["B5"] = "Invoice date", date(2026, 2, 14)
    ws["B5"].number_format = "yyyy-mm-dd"
    for col, h in zip("ABCDE", ["Item", "Qty", "Unit price", "Discount", "Line total"]):
        ws[f"{col}7"] = h
        ws[f"{col}7"].font = BOLD
    items = [
        "Ergonomic chair",
        "Standing desk",
        "Monitor arm",
        "USB-C dock",
        "Desk lamp",
        "Keyboard",
        "Wireless mouse",
        "Cable tray",
        "Footrest",
        "Whiteboard",
        "Webcam",
        "Headset",
    ]
    for i, name in enumerate(items):
        r = 8 + i
        ws[f"A{r}"] = name
        ws[f"B{r}"] = rng.randint(1, 25)
        ws[f"C{r}"] = round(rng.uniform(8, 450), 2)
        ws[f"D{r}"] = rng.choice([0, 0, 0.05, 0.1, 0.15])
        ws[f"C{r}"].number_format = "#,##0.00"
        ws[f"D{r}"].number_format = "0%"
    ws["D21"], ws["D22"], ws["D23"] = "Subtotal", "Tax", "Total"
    for c in ("D21", "D22", "D23"):
        ws[c].font = BOLD
    ws.column_dimensions["A"].width = 20
    ws.column_dimensions["E"].width = 14
    save_wb(wb, "xlsx-invoice-formulas", "invoice.xlsx")


REGIONS = ["Central", "East", "North", "South", "West"]


def region_summary():
    rng = random.Random(22)
    wb = Workbook()
    ws = wb.active
    ws.title = "Orders"
    for col, h in zip("ABCDE", ["Date", "Region", "Rep", "Product", "Amount"]):
        ws[f"{col}1"] = h
        ws[f"{col}1"].font = BOLD
    products = ["Router", "Switch", "Access point", "Firewall", "Cable kit"]
    reps = [f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(9)]
    for r in range(2, 182):
        ws[f"A{r}"] = date(2025, 10, 1) + timedelta(days=rng.randint(0, 91))
        ws[f"A{r}"].number_format = "yyyy-mm-dd"
        ws[f"B{r}"] = rng.choices(REGIONS, weights=[1, 3, 2, 2, 3])[0]
        ws[f"C{r}"] = rng.choice(reps)
        ws[f"D{r}"] = rng.choice(products)
        ws[f"E{r}"] = round(rng.uniform(90, 4800), 2)
        ws[f"E{r}"].number_format = "#,##0.00"
    save_wb(wb, "xlsx-region-summary", "sales.xlsx")


def stock():
    rng = random.Random(33)
    wb = Workbook()
    ws = wb.active
    ws.title = "Stock"
    for col, h in zip("ABCDE", ["SKU", "Name", "On hand", "Reorder level", "Unit cost"]):
        ws[f"{col}1"] = h
    names = [
        "Bolt M6",
        "Bolt M8",
        "Nut M6",
        "Nut M8",
        "Washer 6mm",
        "Washer 8mm",
        "Hinge",
        "Bracket",
        "Caster",
        "Handle",
        "Spring",
        "Clamp",
        "Rivet",
        "Anchor",
        "Hook",
        "Latch",
        "Pulley",
        "Gasket",
        "O-ring",
        "Bearing",
    ]
    for i in range(40):
        r = 2 + i
        ws[f"A{r}"] = f"SKU-{3100 + i * 7}"
        ws[f"B{r}"] = f"{names[i % 20]} {'A' if i < 20 else 'B'}"
        level = rng.choice([20, 25, 40, 50, 75, 100])
        ws[f"D{r}"] = level
        ws[f"C{r}"] = (
            max(0, int(level * rng.uniform(0.1, 3.0))) if i not in (5, 17) else level
        )  # equal: not below
        ws[f"E{r}"] = round(rng.uniform(0.05, 12.0), 2)
    save_wb(wb, "xlsx-stock-reorder", "inventory.xlsx")


def budget():
    rng = random.Random(44)
    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    for col, h in zip("ABC", ["Department", "Budget", "Actual"]):
        ws[f"{col}1"] = h
        ws[f"{col}1"].font = BOLD
    depts = [
        "Engineering",
        "Sales",
        "Marketing",
        "Support",
        "Finance",
        "Legal",
        "Facilities",
        "People",
        "Security",
        "Research",
    ]
    for i, d in enumerate(depts):
        r = 2 + i
        b = rng.randrange(40, 900) * 1000
        ws[f"A{r}"], ws[f"B{r}"] = d, b
        ws[f"C{r}"] = round(b * rng.uniform(0.78, 1.22), 2)
        ws[f"B{r}"].number_format = ws[f"C{r}"].number_format = "#,##0.00"
    ws.column_dimensions["A"].width = 16
    save_wb(wb, "xlsx-budget-variance", "budget.xlsx")


def csv_to_xlsx():
    rng = random.Random(55)
    rows = []
    cats = ["Hardware", "Licences", "Services", "Training", "Travel"]
    customers = [
        "Acme Corp",
        "Blue Fin Ltd",
        "Cobalt GmbH",
        "Delta & Sons",
        "Evergreen Co",
        "Fjord AS",
    ]
    for i in range(160):
        d = date(2025, 7, 1) + timedelta(days=rng.randint(0, 183))
        rows.append(
            [
                f"TX-{8800 + i}",
                d.isoformat(),
                rng.choice(customers),
                rng.choice(cats),
                f"{rng.uniform(15, 7800):.2f}",
            ]
        )
    rng.shuffle(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "date", "customer", "category", "amount"])
    w.writerows(rows)
    save_text("xlsx-from-csv", "data/transactions.csv", buf.getvalue())


def consolidate():
    rng = random.Random(66)
    products = [
        "Apples",
        "Bananas",
        "Cherries",
        "Dates",
        "Figs",
        "Grapes",
        "Kiwis",
        "Lemons",
        "Mangoes",
        "Oranges",
        "Pears",
        "Plums",
    ]
    for region in ["north", "south", "west"]:
        wb = Workbook()
        ws = wb.active
        ws.title = "Q1"
        for col, h in zip("ABCD", ["Product", "Jan", "Feb", "Mar"]):
            ws[f"{col}1"] = h
            ws[f"{col}1"].font = BOLD
        chosen = rng.sample(products, rng.randint(7, 10))
        for i, p in enumerate(chosen):
            ws[f"A{i + 2}"] = p
            for col in "BCD":
                ws[f"{col}{i + 2}"] = rng.randint(120, 2400)
        save_wb(wb, "xlsx-consolidate", f"data/{region}.xlsx")


def gradebook():
    rng = random.Random(77)
    wb = Workbook()
    ws = wb.active
    ws.title = "Scores"
    for col, h in zip("ABCD", ["Student", "Homework", "Midterm", "Final"]):
        ws[f"{col}1"] = h
        ws[f"{col}1"].font = BOLD
    used = set()
    for i in range(30):
        while True:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            if name not in used:
                used.add(name)
                break
        base = rng.uniform(52, 97)
        ws[f"A{i + 2}"] = name
        for col in "BCD":
            ws[f"{col}{i + 2}"] = round(min(100, max(0, base + rng.uniform(-9, 9))), 1)
        # no weighted score exactly halfway between two 1-decimal values (float noise would
        # make ROUND's result depend on the order of the additions)
        while True:
            exact = sum(
                Decimal(str(ws[f"{c}{i + 2}"].value)) * Decimal(w)
                for c, w in zip("BCD", ("0.25", "0.3", "0.45"))
            )
            if (exact * 10) % 1 != Decimal("0.5"):
                break
            ws[f"D{i + 2}"] = round(ws[f"D{i + 2}"].value + 0.1, 1)
    wt = wb.create_sheet("Weights")
    wt["A1"], wt["B1"] = "Component", "Weight"
    for r, (k, v) in enumerate([("Homework", 0.25), ("Midterm", 0.3), ("Final", 0.45)], start=2):
        wt[f"A{r}"], wt[f"B{r}"] = k, v
    save_wb(wb, "xlsx-gradebook", "grades.xlsx")


# --- documents ----------------------------------------------------------------------------


def para(doc, parts, style=None, align=None):
    """parts: list of (text, bold) runs."""
    p = doc.add_paragraph(style=style)
    for text, bold in parts:
        run = p.add_run(text)
        if bold:
            run.bold = True
    if align is not None:
        p.alignment = align
    return p


def offer_letter():
    doc = docx.Document()
    sec = doc.sections[0]
    sec.header.paragraphs[0].text = "Northwind Analytics Ltd. | Confidential | Ref. {{reference}}"
    sec.footer.paragraphs[0].text = "Northwind Analytics Ltd., 14 Quay Street, Bristol BS1 4DJ"
    doc.add_paragraph("Offer of Employment", style="Title")
    para(doc, [("{{letter_date}}", False)], align=WD_ALIGN_PARAGRAPH.RIGHT)
    para(doc, [("Dear {{first_name}} {{last_name}},", False)])
    para(
        doc,
        [
            ("We are pleased to offer you the position of ", False),
            ("{{position}}", True),
            (" in our {{department}} team, starting on {{start_", False),
            ("date}}.", False),
        ],
    )
    para(
        doc,
        [
            ("Your annual base salary will be ", False),
            ("{{salary}}", True),
            (", paid monthly in arrears. The position is based at our {{office}} office.", False),
        ],
    )
    doc.add_paragraph("Summary of terms", style="Heading 2")
    table = doc.add_table(rows=0, cols=2)
    table.style = "Table Grid"
    for k, v in [
        ("Position", "{{position}}"),
        ("Reports to", "{{manager}}"),
        ("Office", "{{office}}"),
        ("Start date", "{{start_date}}"),
        ("Annual salary", "{{salary}}"),
    ]:
        cells = table.add_row().cells
        cells[0].text, cells[1].text = k, v
    doc.add_paragraph("")
    para(
        doc,
        [
            (
                "This offer is conditional on satisfactory references and proof of your right "
                "to work. "
                "The terms above are confidential between you and the company.",
                False,
            )
        ],
    )
    para(
        doc,
        [
            ("Please sign and return a copy of this letter by ", False),
            ("{{reply_by}}", True),
            (".", False),
        ],
    )
    doc.add_paragraph("")
    para(doc, [("Sincerely,", False)])
    para(doc, [("{{manager}}", False)])
    para(doc, [("Head of {{department}}", False)])
    save_doc(doc, "docx-offer-letter", "templates/offer_template.docx")
    record = {
        "reference": "NWA-HR-2026-0317",
        "letter_date": "2026-02-09",
        "first_name": "Ines",
        "last_name": "Okafor-Lindqvist",
        "position": "Senior Data Engineer",
        "department": "Platform",
        "start_date": "2026-04-01",
        "salary": 87500,
        "office": "Bristol",
        "manager": "Tomasz Weber",
        "reply_by": "2026-02-23",
    }
    save_text("docx-offer-letter", "data/candidate.json", json.dumps(record, indent=2) + "\n")


def reminders():
    rng = random.Random(88)
    doc = docx.Document()
    doc.sections[0].header.paragraphs[0].text = "Harbourside Climbing Club"
    doc.add_paragraph("Membership renewal", style="Heading 1")
    para(doc, [("Member no. {{member_id}}", False)])
    para(doc, [("Hello {{first_name}},", False)])
    para(
        doc,
        [
            ("Your ", False),
            ("{{plan}}", True),
            (" membership is due for renewal. The amount due is ", False),
            ("{{amount_due}}", True),
            (", payable by {{due_date}}.", False),
        ],
    )
    para(
        doc,
        [
            (
                "If you have already paid, please ignore this letter. You can pay at the front "
                "desk or "
                "by bank transfer quoting your member number.",
                False,
            )
        ],
    )
    para(doc, [("We will send this reminder to {{email}} as well.", False)])
    doc.add_paragraph("")
    para(doc, [("See you on the wall,", False)])
    para(doc, [("The membership team", False)])
    save_doc(doc, "docx-mail-merge", "templates/reminder_template.docx")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["member_id", "first_name", "last_name", "email", "plan", "amount_due", "due_date"])
    for i in range(9):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        plan = rng.choice(["Monthly", "Annual", "Student", "Family"])
        amt = {"Monthly": 62.5, "Annual": 640.0, "Student": 38.0, "Family": 1180.0}[plan]
        amt = round(amt * rng.choice([1, 1, 1.05, 0.9]), 2)
        due = date(2026, 3, 2) + timedelta(days=rng.randint(0, 40))
        w.writerow(
            [
                f"HCC{4102 + i * 13}",
                first,
                last,
                f"{first}.{last}@mail.example".lower(),
                plan,
                f"{amt}",
                due.isoformat(),
            ]
        )
    save_text("docx-mail-merge", "data/members.csv", buf.getvalue())


def quote():
    doc = docx.Document()
    doc.add_paragraph("Quotation", style="Title")
    para(doc, [("Quote ", False), ("{{quote_no}}", True), (" for {{client}}", False)])
    para(doc, [("Valid until {{valid_until}}. Prices in EUR, excluding VAT.", False)])
    table = doc.add_table(rows=3, cols=4)
    table.style = "Table Grid"
    for cell, text in zip(table.rows[0].cells, ["Item", "Qty", "Unit price", "Amount"]):
        cell.text = ""
        cell.paragraphs[0].add_run(text).bold = True
    for cell, text in zip(
        table.rows[1].cells, ["{{item}}", "{{qty}}", "{{unit_price}}", "{{amount}}"]
    ):
        cell.text = text
    for cell in table.rows[1].cells[1:]:
        cell.paragraphs[0].alignment = WD_ALIGN_PARAGRAPH.RIGHT
    for cell, text in zip(table.rows[2].cells, ["", "", "Total", "{{total}}"]):
        cell.text = ""
        if text:
            cell.paragraphs[0].add_run(text).bold = True
    table.rows[2].cells[3].paragraphs[0].alignment = WD_ALIGN_PARAGRAPH.RIGHT
    doc.add_paragraph("")
    para(doc, [("Payment terms: 30 days net. Delivery within 15 working days of order.", False)])
    para(doc, [("Prepared by {{prepared_by}}", False)])
    save_doc(doc, "docx-table-fill", "templates/quote_template.docx")
    rng = random.Random(99)
    items = [
        "Site survey",
        "Mesh Wi-Fi node",
        "PoE switch 24-port",
        "Cat6 cabling (per metre)",
        "Rack installation",
        "Firewall appliance",
        "Configuration (hours)",
        "Training session",
    ]
    lines = [
        {
            "item": it,
            "qty": rng.choice([1, 2, 4, 6, 8, 12, 120]) if "metre" not in it else 340,
            "unit_price": round(rng.uniform(4, 1900), 2),
        }
        for it in items
    ]
    record = {
        "quote_no": "Q-2026-0588",
        "client": "Lindenhof Hotel GmbH",
        "valid_until": "2026-03-31",
        "prepared_by": "Ana Castro",
        "lines": lines,
    }
    save_text("docx-table-fill", "data/quote.json", json.dumps(record, indent=2) + "\n")


def expenses():
    rng = random.Random(111)
    people = ["Ana Castro", "Ben Ito", "Chloe Dunn", "Dev Larsen", "Elena Varga"]
    cats = ["Accommodation", "Meals", "Mileage", "Software", "Travel"]
    rates = {"USD": 1.0, "EUR": 1.0842, "GBP": 1.2675, "JPY": 0.006712, "CAD": 0.7391}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["expense_id", "date", "employee", "category", "amount", "currency", "status"])
    for i in range(140):
        cur = rng.choices(list(rates), weights=[5, 3, 2, 1, 1])[0]
        amt = rng.uniform(8, 900) / (rates[cur] if cur != "USD" else 1)
        amt = round(amt) if cur == "JPY" else round(amt, 2)
        status = rng.choices(["approved", "rejected", "pending"], weights=[8, 1, 1])[0]
        w.writerow(
            [
                f"E{5000 + i}",
                (date(2026, 1, 1) + timedelta(days=rng.randint(0, 58))).isoformat(),
                rng.choice(people),
                rng.choice(cats),
                amt,
                cur,
                status,
            ]
        )
    save_text("csv-expense-report", "data/expenses.csv", buf.getvalue())
    save_text(
        "csv-expense-report",
        "data/rates.json",
        json.dumps({"base": "USD", "to_usd": rates}, indent=2) + "\n",
    )


def inventory_json():
    rng = random.Random(122)
    whs = {
        "BER": {"name": "Berlin Central", "city": "Berlin"},
        "LYS": {"name": "Lyon Sud", "city": "Lyon"},
        "MAD": {"name": "Madrid Norte", "city": "Madrid"},
        "RTM": {"name": "Rotterdam Port", "city": "Rotterdam"},
        "WAW": {"name": "Warsaw East", "city": "Warsaw"},
    }
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["sku", "warehouse", "qty", "unit_cost"])
    costs = {f"P-{100 + i}": round(rng.uniform(0.5, 240), 2) for i in range(45)}
    for wh in whs:
        for sku in rng.sample(sorted(costs), rng.randint(18, 30)):
            qty = rng.choice([0, 0, rng.randint(1, 40), rng.randint(40, 900)])
            w.writerow([sku, wh, qty, costs[sku]])
    save_text("json-inventory-report", "data/stock.csv", buf.getvalue())
    save_text("json-inventory-report", "data/warehouses.json", json.dumps(whs, indent=2) + "\n")


if __name__ == "__main__":
    for f in [
        invoice,
        region_summary,
        stock,
        budget,
        csv_to_xlsx,
        consolidate,
        gradebook,
        offer_letter,
        reminders,
        quote,
        expenses,
        inventory_json,
    ]:
        f()
    for p in sorted(ROOT.glob("*/environment/**/*")):
        if p.is_file():
            print(p.relative_to(ROOT), p.stat().st_size)
