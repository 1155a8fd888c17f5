"""Verifier: /app/contacts_clean.csv and /app/answer.json against the rules applied, in plain
Python, to the pristine copy of the contacts in /tests/data."""

import csv
import json
import re
from pathlib import Path

import pytest

HEADER = ["id", "full_name", "email", "phone", "city", "updated_at"]


@pytest.fixture(scope="module")
def expected():
    with open("/tests/data/contacts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    best = {}
    valid = 0
    for r in rows:
        email = r["email"].strip().lower()
        if not email or "@" not in email:
            continue
        valid += 1
        key = (r["updated_at"], -int(r["id"]))
        if email not in best or key > best[email][0]:
            best[email] = (key, r, email)
    out = []
    for _, r, email in best.values():
        digits = re.sub(r"[^0-9]", "", r["phone"])
        if len(digits) == 11 and digits[0] == "1":
            digits = digits[1:]
        phone = f"{digits[:3]}-{digits[3:6]}-{digits[6:]}" if len(digits) == 10 else ""
        out.append(
            [
                r["id"],
                " ".join(r["full_name"].split()),
                email,
                phone,
                r["city"].strip(),
                r["updated_at"],
            ]
        )
    out.sort(key=lambda row: int(row[0]))
    counts = {
        "input_rows": len(rows),
        "dropped_invalid_email": len(rows) - valid,
        "duplicates_removed": valid - len(out),
        "output_rows": len(out),
    }
    return out, counts


def test_clean_csv(expected):
    rows, _ = expected
    path = Path("/app/contacts_clean.csv")
    assert path.is_file(), "/app/contacts_clean.csv is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == HEADER
        got = [r for r in reader if r]
    assert len(got) == len(rows)
    for g, w in zip(got, rows):
        assert g == w, (g, w)


def test_counts(expected):
    _, counts = expected
    path = Path("/app/answer.json")
    assert path.is_file(), "/app/answer.json is missing"
    assert json.loads(path.read_text()) == counts
