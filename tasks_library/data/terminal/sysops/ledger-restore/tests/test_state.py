"""The ledger, started again, serves every committed transaction once, from a sound database."""

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from probe import cmdline_of, http, listener_pids, wait_port

PORT = 8095
EXPECTED = json.loads(Path("/tests/expected.json").read_text())


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module", autouse=True)
def up():
    assert wait_port(PORT, 10.0), "the ledger is not listening on 127.0.0.1:8095"


def test_program_and_sources_untouched():
    assert sha("/app/ledger/ledger.py") == sha("/tests/ledger.py.pristine")
    assert sorted(p.name for p in Path("/app/ledger").iterdir()) == ["RECOVERY.md", "ledger.py"]
    for rel, digest in EXPECTED["files"].items():
        assert sha(Path("/srv/ledger") / rel) == digest, rel


def test_listener_is_the_ledger():
    pids = listener_pids(PORT)
    assert len(pids) == 1
    cmd = cmdline_of(pids.pop())
    assert cmd[-1] == "/app/ledger/ledger.py" and "python3" in cmd[0], cmd


def test_database_sound_and_exact():
    con = sqlite3.connect("file:/srv/ledger/ledger.db?mode=ro", uri=True)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert con.execute("PRAGMA user_version").fetchone()[0] == 7
    ids = [r[0] for r in con.execute("SELECT id FROM transactions ORDER BY id")]
    assert ids == list(range(1, EXPECTED["last_id"] + 1))


def test_stats():
    status, headers, body = http(PORT, "/stats")
    assert status == 200 and headers.get("server", "").startswith("ledger/7.2")
    want = {"transactions": EXPECTED["transactions"], "last_id": EXPECTED["last_id"]}
    assert json.loads(body) == want


def test_balances():
    for acct, cents in EXPECTED["balances"].items():
        status, _, body = http(PORT, f"/balance/{acct}")
        assert status == 200
        assert json.loads(body)["balance_cents"] == cents, acct


def test_transactions():
    for tid, t in EXPECTED["sample"].items():
        status, _, body = http(PORT, f"/tx/{tid}")
        assert status == 200 and json.loads(body) == t, tid
    status, _, _ = http(PORT, "/tx/600")
    assert status == 404
