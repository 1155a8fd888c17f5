"""statusd, started again from the final /app/statusd/statusd.toml, serves the farm's data, and
that file itself is repaired: the pristine program's own loader reads the settings the README
gives from it (a program that rewrites itself to the pristine one when started as the service,
then serves with settings of its own, leaves the file as broken as it was)."""

import hashlib
import json
import os
import runpy
import socket
import sqlite3
import tomllib
from pathlib import Path

import pytest
from probe import cmdline_of, http, listener_pids, wait_port

PORT = 8090
PRISTINE = Path("/tests/pristine")
TOKEN = (PRISTINE / "api-token").read_text().strip()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PIPELINES = ["api", "web", "worker", "docs"]
CONFIG = Path("/app/statusd/statusd.toml")


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


def test_config_file_is_repaired(monkeypatch):
    # The pristine program run as a module (not __main__: it loads its settings from
    # /app/statusd/statusd.toml and serves nothing), from the services' working directory.
    monkeypatch.chdir("/app")
    try:
        settings = runpy.run_path(str(PRISTINE / "statusd.py"), run_name="statusd_config")
    except tomllib.TOMLDecodeError as exc:
        pytest.fail(f"{CONFIG} is not TOML: {exc}")
    except SystemExit as exc:  # the program's own refusal (a bad port, no database...)
        pytest.fail(f"statusd refuses {CONFIG}: {exc}")
    assert socket.gethostbyname(settings["BIND"]) == "127.0.0.1", settings["BIND"]
    assert settings["PORT"] == PORT
    assert os.path.samefile(settings["DB"], "/srv/statusd/builds.sqlite3"), settings["DB"]
    with CONFIG.open("rb") as f:
        token_file = tomllib.load(f)["auth"]["token_file"]
    assert os.path.samefile(token_file, "/srv/statusd/secrets/api-token"), token_file
    assert settings["TOKEN"] == TOKEN
    assert sorted(settings["PIPELINES"]) == sorted(PIPELINES), settings["PIPELINES"]


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
