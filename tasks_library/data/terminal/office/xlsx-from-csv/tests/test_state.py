"""Verifier: /app/transactions.xlsx against the pristine CSV (tests/pristine/data): the sorted
rows with real dates and numbers, formats, filter, frozen panes, widths; the Totals formulas
recomputed by xlformula over the pristine rows and over altered amounts and categories."""

import csv
import datetime
import random

import pytest
from xlcheck import check_formulas, load, sheet


@pytest.fixture(scope="module")
def rows():
    with open("/tests/pristine/data/transactions.csv", newline="") as fh:
        data = list(csv.DictReader(fh))
    data.sort(key=lambda r: (r["date"], r["id"]))
    return data


@pytest.fixture(scope="module")
def wb():
    return load("/app/transactions.xlsx")


def test_transactions_sheet(wb, rows):
    assert wb.sheetnames[:2] == ["Transactions", "Totals"]
    ws = wb["Transactions"]
    assert [ws.cell(1, c).value for c in range(1, 6)] == [
        "Date",
        "ID",
        "Customer",
        "Category",
        "Amount",
    ]
    assert all(ws.cell(1, c).font.b for c in range(1, 6)), "header not bold"
    assert ws.max_row == len(rows) + 1
    for i, r in enumerate(rows, start=2):
        d = ws[f"A{i}"].value
        assert isinstance(d, (datetime.date, datetime.datetime)), f"A{i} is not a date: {d!r}"
        d = d.date() if isinstance(d, datetime.datetime) else d
        assert d.isoformat() == r["date"], (i, d, r["date"])
        assert ws[f"A{i}"].number_format == "yyyy-mm-dd", f"A{i}"
        assert [ws[f"{c}{i}"].value for c in "BCD"] == [r["id"], r["customer"], r["category"]], i
        amount = ws[f"E{i}"].value
        assert isinstance(amount, (int, float)) and not isinstance(amount, bool), (
            f"E{i} is not a number"
        )
        assert abs(amount - float(r["amount"])) < 1e-9, i
        assert ws[f"E{i}"].number_format == "#,##0.00", f"E{i}"


def test_table_features(wb, rows):
    ws = wb["Transactions"]
    assert ws.auto_filter.ref == f"A1:E{len(rows) + 1}", ws.auto_filter.ref
    assert ws.freeze_panes == "A2", ws.freeze_panes
    for col in "ABCDE":
        width = ws.column_dimensions[col].width
        assert width is not None and width >= 12, (col, width)


def test_totals(wb, rows):
    ws = sheet(wb, "Totals")
    cats = sorted({r["category"] for r in rows})
    last = len(cats) + 2
    assert ws["A1"].value == "Category" and ws["B1"].value == "Amount"
    assert ws["A1"].font.b and ws["B1"].font.b
    assert [ws[f"A{i}"].value for i in range(2, last)] == cats
    assert ws[f"A{last}"].value == "Total"
    for i in range(2, last + 1):
        assert ws[f"B{i}"].number_format == "#,##0.00", f"B{i}"
    n = len(rows)
    scenarios = []
    for label, seed in [("the transactions", None), ("altered rows 1", 1), ("altered rows 2", 2)]:
        cat = [r["category"] for r in rows]
        amt = [float(r["amount"]) for r in rows]
        if seed is not None:
            rng = random.Random(seed)
            cat = [
                cats[(i + seed) % len(cats)] if i < len(cats) else rng.choice(cats)
                for i in range(n)
            ]
            amt = [round(rng.uniform(1, 5000), 2) for _ in range(n)]
        overrides = {}
        for i in range(n):
            overrides[("Transactions", f"D{i + 2}")] = cat[i]
            overrides[("Transactions", f"E{i + 2}")] = amt[i]
        cells = {
            ("Totals", f"B{j}"): sum(a for c, a in zip(cat, amt) if c == name)
            for j, name in enumerate(cats, start=2)
        }
        cells[("Totals", f"B{last}")] = sum(amt)
        scenarios.append((label, overrides, cells))
    check_formulas(wb, scenarios, tol=1e-6)
