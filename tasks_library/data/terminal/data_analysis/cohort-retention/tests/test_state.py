"""Verifier: /app/retention.csv against retention recomputed in plain Python from the pristine
copies of the users and events in /tests/data."""

import csv
from pathlib import Path

import pytest

HEADER = ["cohort", "size", "m0", "m1", "m2", "m3", "m4", "m5"]


def month_index(text):
    return int(text[:4]) * 12 + int(text[5:7]) - 1


@pytest.fixture(scope="module")
def expected():
    with open("/tests/data/users.csv", newline="") as fh:
        cohort = {r["user_id"]: month_index(r["signup_date"]) for r in csv.DictReader(fh)}
    active = set()
    with open("/tests/data/events.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            active.add((r["user_id"], month_index(r["event_date"])))
    last = month_index("2024-06")
    members = {}
    for u, c in cohort.items():
        members.setdefault(c, []).append(u)
    out = []
    for c in sorted(members):
        row = [f"{c // 12}-{c % 12 + 1:02d}", len(members[c])]
        for k in range(6):
            if c + k > last:
                row.append(None)
            else:
                row.append(sum((u, c + k) in active for u in members[c]) / len(members[c]))
        out.append(row)
    return out


def test_retention(expected):
    path = Path("/app/retention.csv")
    assert path.is_file(), "/app/retention.csv is missing"
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        assert next(reader) == HEADER
        got = [r for r in reader if r]
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        assert len(g) == 8, g
        assert g[0] == w[0] and int(g[1]) == w[1], (g, w)
        for cell, want in zip(g[2:], w[2:]):
            if want is None:
                assert cell.strip() == "", (g, w)
            else:
                assert abs(float(cell) - want) <= 0.00006, (g, w)
