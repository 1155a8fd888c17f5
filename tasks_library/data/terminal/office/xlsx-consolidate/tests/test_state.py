"""Verifier: /app/consolidated.xlsx against the pristine regional workbooks (tests/pristine/data):
the All rows, headers, and the formulas recomputed by xlformula over the pristine monthly
figures and over altered ones."""

import random

import pytest
from openpyxl import load_workbook
from xlcheck import check_formulas, load, sheet


@pytest.fixture(scope="module")
def rows():
    out = []
    for region in ("north", "south", "west"):
        ws = load_workbook(f"/tests/pristine/data/{region}.xlsx")["Q1"]
        for product, jan, feb, mar in ws.iter_rows(min_row=2, values_only=True):
            out.append((region.capitalize(), product, jan, feb, mar))
    return sorted(out)


@pytest.fixture(scope="module")
def wb():
    return load("/app/consolidated.xlsx")


def test_all_sheet(wb, rows):
    assert wb.sheetnames[:2] == ["All", "By product"]
    ws = wb["All"]
    assert [ws.cell(1, c).value for c in range(1, 7)] == [
        "Region",
        "Product",
        "Jan",
        "Feb",
        "Mar",
        "Total",
    ]
    assert all(ws.cell(1, c).font.b for c in range(1, 7))
    got = [tuple(ws.cell(r, c).value for c in range(1, 6)) for r in range(2, ws.max_row + 1)]
    assert got == rows


def test_by_product_layout(wb, rows):
    ws = sheet(wb, "By product")
    products = sorted({r[1] for r in rows})
    assert [ws.cell(1, c).value for c in range(1, 4)] == ["Product", "Regions", "Q1 total"]
    assert all(ws.cell(1, c).font.b for c in range(1, 4))
    assert [ws[f"A{i}"].value for i in range(2, len(products) + 2)] == products
    assert ws[f"A{len(products) + 2}"].value == "Total"


def test_formulas(wb, rows):
    products = sorted({r[1] for r in rows})
    last = len(products) + 2
    scenarios = []
    for label, seed in [("the figures", None), ("altered figures 1", 1), ("altered figures 2", 2)]:
        figures = [list(r[2:]) for r in rows]
        if seed is not None:
            rng = random.Random(seed)
            figures = [[rng.randint(0, 9999) for _ in range(3)] for _ in rows]
        overrides, cells = {}, {}
        for i, f in enumerate(figures, start=2):
            for col, v in zip("CDE", f):
                overrides[("All", f"{col}{i}")] = v
            cells[("All", f"F{i}")] = sum(f)
        for j, p in enumerate(products, start=2):
            idx = [k for k, r in enumerate(rows) if r[1] == p]
            cells[("By product", f"B{j}")] = len(idx)
            cells[("By product", f"C{j}")] = sum(sum(figures[k]) for k in idx)
        cells[("By product", f"C{last}")] = sum(sum(f) for f in figures)
        scenarios.append((label, overrides, cells))
    check_formulas(wb, scenarios, tol=1e-9)
