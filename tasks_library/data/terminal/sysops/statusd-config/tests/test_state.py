"""statusd, started again from the final /app/statusd/statusd.toml, serves the farm's data."""

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from probe import cmdline_of, http, listener_pids, wait_port

PORT = 8090
PRISTINE = Path("/tests/pristine")
TOKEN = (PRISTINE / "api-token").read_text().strip()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PIPELINES = ["api", "web", "worker", "docs"]


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pristine_db():
    return sqlite3.connect(f"file:{PRISTINE / 'builds.sqlite3'}?mode=ro&immutable=1", uri=True)


@pytest.fixture(scope="module", autouse=True)
def up():
    assert wait_port(PORT, 10.0), "nothing listens on 127.0.0.1:8090 after statusd was started"


def test_program_and_data_untouched():
    assert sha("/app/statusd/statusd.py") == sha(PRISTINE / "statusd.py")
    assert sorted(p.name for p in Path("/app/statusd").iterdir()) == [
        "README.md",
        "statusd.py",
        "statusd.toml",
    ]
    assert sha("/srv/statusd/builds.sqlite3") == sha(PRISTINE / "builds.sqlite3")
    assert sha("/srv/statusd/secrets/api-token") == sha(PRISTINE / "api-token")


def test_listener_is_statusd():
    pids = listener_pids(PORT)
    assert len(pids) == 1
    cmd = cmdline_of(pids.pop())
    assert cmd[-1] == "/app/statusd/statusd.py" and "python3" in cmd[0], cmd


def test_bound_to_loopback_only():
    # /proc/net/tcp: 0100007F:1F9A is 127.0.0.1:8090 (0.0.0.0 would be 00000000)
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local = {x.split()[1] for x in lines if x.split()[3] == "0A"}
    assert f"0100007F:{PORT:04X}" in local


def test_token_required():
    status, _, _ = http(PORT, "/status")
    assert status == 401
    status, _, _ = http(PORT, "/status", headers={"Authorization": "Bearer wrong-token-000000"})
    assert status == 401


def test_status_is_the_farms_data():
    status, headers, body = http(PORT, "/status", headers=AUTH)
    assert status == 200, body[:200]
    assert headers.get("server", "").startswith("statusd/1.4.2")
    data = json.loads(body)
    con = pristine_db()
    assert data["states"] == dict(con.execute("SELECT state, COUNT(*) FROM builds GROUP BY state"))
    assert sorted(data["latest"]) == sorted(PIPELINES)
    for pipeline in PIPELINES:
        bid, state = con.execute(
            "SELECT id, state FROM builds WHERE pipeline = ? ORDER BY started DESC LIMIT 1",
            (pipeline,),
        ).fetchone()
        assert data["latest"][pipeline] == {"id": bid, "state": state}, pipeline


@pytest.mark.parametrize("build_id", [1001, 1120, 1241])
def test_build_lookup(build_id):
    status, _, body = http(PORT, f"/builds/{build_id}", headers=AUTH)
    assert status == 200
    row = (
        pristine_db()
        .execute("SELECT id, pipeline, state, started FROM builds WHERE id = ?", (build_id,))
        .fetchone()
    )
    assert json.loads(body) == dict(zip(("id", "pipeline", "state", "started"), row))
