"""/app/out/reorder.csv proposes exactly the orders the reorder policy gives."""

import csv
import json
from pathlib import Path

EXPECTED = json.loads(Path("/tests/expected.json").read_text())


def test_reorder_csv():
    with open("/app/out/reorder.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["sku", "supplier", "quantity"]
    body = [r for r in rows[1:] if r]
    got = [(r[0].strip(), r[1].strip(), int(r[2])) for r in body]
    want = [(e["sku"], e["supplier"], e["quantity"]) for e in EXPECTED]
    assert [g[0] for g in got] == [w[0] for w in want], "not the right items (or not sorted)"
    assert got == want
