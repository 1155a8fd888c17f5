"""A launched web server's workers warm up before they serve, and the readiness probe
(``/healthz``) answers 200 only while every worker of the server is warm (core/readiness.py,
console/warmup.py): a worker that dies makes the server not ready until its replacement has
warmed up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from console.management.stack import web_server_argv
from core import readiness
from tests.ports import free_port, wait_answering

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def health(base: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.add(int(stat.parent.name))
    return found


def test_healthz_waits_for_every_worker_to_warm_and_for_a_dead_ones_replacement(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        **readiness.server_environment(2, tmp_path),
        "CRUCIBLE_LOG_LEVEL": "INFO",
    }
    ready_dir = Path(env[readiness.READY_DIR_ENV])
    proc = subprocess.Popen(
        web_server_argv("127.0.0.1", port, workers=2),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(proc, f"{base}/healthz", seconds=120)
        status, body = health(base)
        assert status == 200 and body["checks"]["workers"] == "ok", body
        workers = children(proc.pid)
        assert len(workers) == 2, workers
        # one marker per worker, each naming the server (granian's main process) and itself
        assert sorted(p.name for p in ready_dir.iterdir()) == sorted(
            f"{proc.pid}-{pid}" for pid in workers
        )

        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        # the survivor answers, and says the server is not ready until a replacement is warm
        seen_warming = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                status, body = health(base)
            except (ConnectionError, urllib.error.URLError):
                # a connection the killed worker had accepted dies with it (a reset): as a
                # client would, ask again; the survivor answers the next one
                time.sleep(0.1)
                continue
            if status == 503:
                seen_warming = body["checks"]["workers"]
                assert body["ok"] is False
            elif seen_warming and children(proc.pid) - {victim} and len(children(proc.pid)) == 2:
                break
            time.sleep(0.1)
        assert seen_warming == "warming: 1 of 2 workers ready", seen_warming
        assert status == 200 and body["checks"]["workers"] == "ok", body
        assert victim not in children(proc.pid)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0].decode(errors="replace")
    # each worker (the two first and the replacement) warmed before it served
    warmed = [line for line in output.splitlines() if "warm in" in line]
    assert len(warmed) == 3, output[-3000:]
    compiled = [int(re.search(r"'templates': (\d+)", line).group(1)) for line in warmed]
    assert min(compiled) >= 10, warmed  # the console's pages, at least
    assert "Traceback" not in output, output[-3000:]


def test_the_launcher_waits_for_every_worker_and_removes_the_ready_directory(monkeypatch):
    from django.conf import settings  # noqa: PLC0415

    from console.management.stack import Stack  # noqa: PLC0415
    from tests.database import child_database_url  # noqa: PLC0415

    monkeypatch.setenv("DATABASE_URL", child_database_url())
    monkeypatch.delenv("DATABASE_URL_FILE", raising=False)
    run_dir = Path(settings.VAR_DIR) / "run"
    before = set(run_dir.glob("crucible-web-ready-*"))
    with Stack() as stack:
        base = stack.web(free_port(), workers=2)
        # web() returned: both workers are warm, each has its marker
        (ready_dir,) = set(run_dir.glob("crucible-web-ready-*")) - before
        assert len(list(ready_dir.iterdir())) == 2
        assert health(base)[1]["checks"]["workers"] == "ok"
    assert not ready_dir.exists()
