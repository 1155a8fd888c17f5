"""Verifier: /app/answer.json against figures recomputed in Python from the pristine database in
/tests/data, and /app/overdue.sql run (read-only, SELECT only) against that database and against
two altered copies of it, its rows compared with rows computed in Python."""

import json
import math
import shutil
import sqlite3
import time
from datetime import date
from pathlib import Path

import pytest

PRISTINE = Path("/tests/data/library.db")
ASOF = "2025-06-30"
KEYS = {
    "top_books",
    "never_borrowed",
    "avg_loan_days_by_genre",
    "late_return_rate",
    "overdue_loans",
}


def rows(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def days(a, b):
    return (date.fromisoformat(b) - date.fromisoformat(a)).days


@pytest.fixture(scope="module")
def expected():
    books = dict(rows(PRISTINE, "SELECT book_id, genre FROM books"))
    loans = rows(PRISTINE, "SELECT book_id, loaned_on, due_on, returned_on FROM loans")
    counts = {}
    for b, *_ in loans:
        counts[b] = counts.get(b, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    per_genre = {}
    late = returned = overdue = 0
    for b, loaned, due, ret in loans:
        if ret is None:
            overdue += due < ASOF
            continue
        returned += 1
        late += ret > due
        per_genre.setdefault(books[b], []).append(days(loaned, ret))
    return {
        "top_books": [b for b, _ in ranked[:5]],
        "never_borrowed": len(set(books) - set(counts)),
        "avg_loan_days_by_genre": {g: sum(v) / len(v) for g, v in per_genre.items()},
        "late_return_rate": late / returned,
        "overdue_loans": overdue,
    }


@pytest.fixture(scope="module")
def answer():
    path = Path("/app/answer.json")
    assert path.is_file(), "/app/answer.json is missing"
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def close(got, want, tol):
    return (
        isinstance(got, (int, float))
        and not isinstance(got, bool)
        and math.isfinite(got)
        and abs(got - want) <= tol
    )


def test_keys(answer):
    assert set(answer) == KEYS


def test_top_and_counts(answer, expected):
    assert answer["top_books"] == expected["top_books"]
    assert answer["never_borrowed"] == expected["never_borrowed"]
    assert answer["overdue_loans"] == expected["overdue_loans"]


def test_genre_means(answer, expected):
    got = answer["avg_loan_days_by_genre"]
    assert isinstance(got, dict) and set(got) == set(expected["avg_loan_days_by_genre"])
    for g, v in expected["avg_loan_days_by_genre"].items():
        assert close(got[g], v, 0.0051), (g, got[g], v)


def test_late_rate(answer, expected):
    assert close(answer["late_return_rate"], expected["late_return_rate"], 0.00006)


# --- overdue.sql -------------------------------------------------------------------------------

ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}


def run_agent_query(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.set_authorizer(
        lambda action, *args: sqlite3.SQLITE_OK if action in ALLOWED else sqlite3.SQLITE_DENY
    )
    deadline = time.monotonic() + 10
    con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10000)
    try:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return names, cur.fetchall()
    finally:
        con.close()


def overdue_rows(db):
    names = dict(rows(db, "SELECT member_id, name FROM members"))
    per = {}
    for member, due in rows(db, "SELECT member_id, due_on FROM loans WHERE returned_on IS NULL"):
        if due < ASOF:
            count, oldest = per.get(member, (0, due))
            per[member] = (count + 1, min(oldest, due))
    out = [(m, names[m], c, d) for m, (c, d) in per.items()]
    return sorted(out, key=lambda r: (-r[2], r[0]))


def variant(tmp_path, name, statements):
    db = tmp_path / name
    shutil.copyfile(PRISTINE, db)
    con = sqlite3.connect(db)
    con.executescript(statements)
    con.commit()
    con.close()
    return db


@pytest.fixture(scope="module")
def query():
    path = Path("/app/overdue.sql")
    assert path.is_file(), "/app/overdue.sql is missing"
    sql = path.read_text().strip()
    assert sql, "overdue.sql is empty"
    return sql


def check_query(db, sql):
    names, got = run_agent_query(db, sql)
    assert [n.lower() for n in names] == ["member_id", "name", "overdue_count", "oldest_due_on"]
    want = overdue_rows(db)
    assert len(want) > 3
    assert [tuple(r) for r in got] == want


def test_query_on_library(query):
    check_query(PRISTINE, query)


def test_query_on_altered_libraries(query, tmp_path):
    one = variant(
        tmp_path,
        "one.db",
        """
        UPDATE loans SET returned_on = NULL WHERE loan_id % 7 = 3 AND due_on < '2025-05-01';
        UPDATE loans SET returned_on = due_on WHERE loan_id % 5 = 0 AND returned_on IS NULL;
        UPDATE members SET name = name || ' Jr.' WHERE member_id % 4 = 1;""",
    )
    check_query(one, query)
    two = variant(
        tmp_path,
        "two.db",
        """
        DELETE FROM loans WHERE member_id % 3 = 0;
        UPDATE loans SET due_on = '2025-06-30' WHERE loan_id % 11 = 2;
        UPDATE loans SET returned_on = NULL, due_on = '2025-06-29' WHERE loan_id % 13 = 4;""",
    )
    check_query(two, query)
