"""Terminal tasks: a session opened with a service started in it, and a task graded, against a
bubblewrap sandbox started per task over the same Debian root, side by side in one run.

The task is a small system-operations one: nginx (Debian's ``nginx-light``, in the Debian root
built with the terminal sets' packages) serves ``/app/www`` on the machine's loopback, from a
configuration the task copies to ``/etc/nginx/nginx.conf``; its verifier probes the page and
writes the reward. Measured, in alternating rounds (the same load on both sides):

* **open with a service**: from nothing to the service answering on the sandbox's loopback.
  Crucible: ``open_terminal_session`` (a session of the state on the root, its state
  directories mounted, the service started) and one probe call, as a rollout opens a terminal
  task's session. Peer: what a team runs without Crucible, per task: a fresh copy of the state
  (the task's files, and the root's ``/etc/nginx`` beside them), then ``bwrap`` over the same
  root (``--ro-bind`` of the root's directories, ``--bind`` of the state's, ``--unshare-all``,
  ``--die-with-parent``, an unprivileged uid) starting nginx and probing it, as a Docker-based
  harness starts a container per task (no Docker daemon runs here).
* **grading**: a final state verified. Crucible: ``run_verifier`` (a fresh session, the
  service started again under Landlock, ``tests/test.sh``, the reward read). Peer: a fresh copy
  of the state and the tests, ``bwrap`` starting the service and running the same ``test.sh``,
  the reward file read.

Prints JSON: milliseconds per side (median, min, max, each round), ``ratios`` (peer median /
Crucible median: above 1,
Crucible is faster) and the rewards (both sides must grade the state 1).

Run: ``.venv/bin/python benchmarks/terminal_tasks.py`` (as root: the Debian root is built in a
user namespace, and bubblewrap's uid switch); ``--quick`` (3 rounds) is what CI runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import parse
from sandboxes.sessions.terminal import open_terminal_session, run_verifier, state_workspace

PACKAGES = ["cron", "jq", "logrotate", "nginx-light", "redis-server", "sqlite3"]
NGINX_CONF = """\
worker_processes 1;
pid /tmp/nginx.pid;
error_log /tmp/nginx-error.log;
events { worker_connections 64; }
http {
    include /etc/nginx/mime.types;
    access_log /tmp/nginx-access.log;
    client_body_temp_path /tmp/nginx-body;
    proxy_temp_path /tmp/nginx-proxy;
    fastcgi_temp_path /tmp/nginx-fastcgi;
    uwsgi_temp_path /tmp/nginx-uwsgi;
    scgi_temp_path /tmp/nginx-scgi;
    server { listen 127.0.0.1:8080; root /app/www; }
}
"""
STATE = {
    "app/www/index.html": b"hello from the task\n",
    "etc/nginx/nginx.conf": NGINX_CONF.encode(),
}
STATE_DIRS = ["/app", "/etc/nginx"]
SERVICE = "nginx -c /etc/nginx/nginx.conf"
PROBE = (
    "for i in $(seq 100); do curl -fsS http://127.0.0.1:8080/index.html > /tmp/got 2>/dev/null "
    "&& break; sleep 0.02; done; cat /tmp/got"
)
TEST_SH = (
    "#!/bin/bash\nmkdir -p /logs/verifier\n"
    + PROBE.replace("cat /tmp/got", "")
    + '\nif [ "$(cat /tmp/got)" = "hello from the task" ]; then echo 1; else echo 0; fi'
    " > /logs/verifier/reward.txt\n"
)


def crucible_open(environment: dict, runtime: str) -> tuple[float, str]:
    started = time.perf_counter()
    session, _services, _isolation = open_terminal_session(
        state_workspace(STATE, ()),
        state_dirs=STATE_DIRS,
        services=[SERVICE],
        workdir="/app",
        environment=environment,
        runtime=runtime,
    )
    try:
        got = session.exec(PROBE, cwd="/app", timeout_s=30).stdout
        seconds = time.perf_counter() - started
    finally:
        session.close()
    return seconds * 1000, got


def crucible_grade(environment: dict, runtime: str) -> tuple[float, float]:
    started = time.perf_counter()
    outcome = run_verifier(
        STATE,
        executable=(),
        state_dirs=STATE_DIRS,
        tests={"test.sh": TEST_SH.encode()},
        workdir="/app",
        services=[SERVICE],
        timeout_s=30,
        environment=environment,
        runtime=runtime,
    )
    return (time.perf_counter() - started) * 1000, outcome.reward


def _peer_state(root: Path, scratch: Path, *, tests: bool) -> Path:
    """A fresh copy of the state: the task's files and the root's /etc/nginx beside them."""
    state = Path(tempfile.mkdtemp(dir=scratch))
    shutil.copytree(root / "etc/nginx", state / "etc/nginx", symlinks=True)
    for path, data in STATE.items():
        target = state / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if tests:
        (state / "tests").mkdir()
        (state / "tests/test.sh").write_bytes(TEST_SH.encode())
        (state / "logs/verifier").mkdir(parents=True)
    state.chmod(0o755)  # bwrap maps its uid 65534 to this (root) process's: root owns it all
    return state


def _bwrap(root: Path, state: Path, script: str, *, tests: bool) -> subprocess.CompletedProcess:
    binds = ["--bind", str(state / "app"), "/app", "--bind", str(state / "etc/nginx"), "/etc/nginx"]
    if tests:
        binds += ["--ro-bind", str(state / "tests"), "/tests"]
        binds += ["--bind", str(state / "logs"), "/logs"]
    system = []  # the root's entries on bwrap's own tmpfs root (so /app can be made)
    for entry in sorted(root.iterdir()):
        if entry.name in ("dev", "proc", "tmp"):
            continue
        if entry.is_symlink():
            system += ["--symlink", os.readlink(entry), f"/{entry.name}"]
        elif entry.is_dir():
            system += ["--ro-bind", str(entry), f"/{entry.name}"]
    command = [
        "bwrap", *system, "--dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/tmp", *binds, "--unshare-all", "--die-with-parent",
        "--uid", "65534", "--gid", "65534", "--chdir", "/app",
        "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "bash", "-c", script,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def peer_open(root: Path, scratch: Path) -> tuple[float, str]:
    started = time.perf_counter()
    state = _peer_state(root, scratch, tests=False)
    done = _bwrap(root, state, f"{SERVICE}; {PROBE}", tests=False)
    seconds = time.perf_counter() - started
    shutil.rmtree(state)
    return seconds * 1000, done.stdout


def peer_grade(root: Path, scratch: Path) -> tuple[float, float]:
    started = time.perf_counter()
    state = _peer_state(root, scratch, tests=True)
    _bwrap(root, state, f"{SERVICE}; bash /tests/test.sh", tests=True)
    reward_file = state / "logs/verifier/reward.txt"
    reward = float(reward_file.read_text()) if reward_file.exists() else 0.0
    seconds = time.perf_counter() - started
    shutil.rmtree(state)
    return seconds * 1000, reward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="alternating rounds (default 30)")
    args = common.parse_args(parser, {"rounds": 3})
    if not shutil.which("bwrap"):
        sys.exit("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    with common.private_var_dir() as var, Stack() as stack:
        built = materialise(parse("python3.13", [], debian_packages=PACKAGES))
        environment = built.request_field()
        root = built.root.tree
        runtime = "python3.13"
        proc, _slots = common.own_session_worker(stack, runtime, slots=2)
        scratch = Path(tempfile.mkdtemp(dir=var))
        for place in (var, scratch):  # bwrap resolves its binds as the sandbox's uid
            place.chmod(0o711)
        figures = {"crucible": {"open": [], "grade": []}, "peer": {"open": [], "grade": []}}
        answers, rewards = set(), set()
        try:
            crucible_open(environment, runtime)  # warm: the worker's zygote for this root
            for index in range(args.rounds):
                for side in common.alternating(index, ("crucible", "peer")):
                    if side == "crucible":
                        ms, got = crucible_open(environment, runtime)
                        grade_ms, reward = crucible_grade(environment, runtime)
                    else:
                        ms, got = peer_open(root, scratch)
                        grade_ms, reward = peer_grade(root, scratch)
                    figures[side]["open"].append(ms)
                    figures[side]["grade"].append(grade_ms)
                    answers.add((side, got.strip()))
                    rewards.add((side, reward))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    spread = {
        side: {kind: common.spread(values, 1) for kind, values in kinds.items()}
        for side, kinds in figures.items()
    }
    report = {
        "quick": args.quick,
        "rounds": args.rounds,
        "unit": "ms",
        "open_with_service_ms": {side: spread[side]["open"] for side in spread},
        "grading_ms": {side: spread[side]["grade"] for side in spread},
        "ratios": {
            "open_peer_over_crucible": round(
                spread["peer"]["open"]["median"] / spread["crucible"]["open"]["median"], 3
            ),
            "grading_peer_over_crucible": round(
                spread["peer"]["grade"]["median"] / spread["crucible"]["grade"]["median"], 3
            ),
        },
        "probe_answers": sorted(f"{side}: {got}" for side, got in answers),
        "rewards": sorted(f"{side}: {reward}" for side, reward in rewards),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
