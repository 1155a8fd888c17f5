"""A sandbox pod gets Redis and nothing else: no database (its NetworkPolicy allows none), an
image without the training stack (deploy/docker/sandbox-requirements-exclude.txt) and, in
production, a Redis user limited to the queue's keys (deploy/redis/sandbox-acl.txt). Here a
real `manage.py sandbox_worker` runs that way: every module the sandbox image lacks is made
unimportable, DATABASE_URL points at a closed port, it logs in as such a Redis user, and it
grades real submissions that come through its queue."""

import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings

from sandboxes import queue as Q
from sandboxes.sessions import Workspace, routing
from sandboxes.sessions.client import _send_and_wait
from tests.deploy import image_closure
from tests.deploy.manifests import ROOT
from tests.redisdb import isolated_db, url_with_db

DB = isolated_db(13)  # a Redis database of its own, not the one the session's workers consume
PROGRAMS = {
    "python": (
        Q.python_tests,
        "def add(a, b):\n    return a + b\n",
        "def add(a, b):\n    return a - b\n",
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n",
    ),
    "node": (
        Q.javascript_tests,
        "const add = (a, b) => {\n  return a + b\n}\n",
        "const add = (a, b) => {\n  return a - b\n}\n",
        (
            "const testAdd = () => {\n  console.assert(add(1, 2) === 3)\n"
            "  console.assert(add(2, 2) === 4)\n}\ntestAdd()\n"
        ),
    ),
}


ACL_RULES = next(
    line
    for line in (ROOT / "deploy" / "redis" / "sandbox-acl.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
ACL_USER, ACL_PASSWORD = "crucible-sandbox-test", uuid.uuid4().hex


def test_the_image_leaves_out_the_training_stack():
    modules, distributions = image_closure.blocked_modules()
    assert {"torch", "transformers", "numpy", "scipy", "kubernetes"} <= modules
    kept = image_closure.closure(image_closure.sandbox_requirements())
    # the closure follows dependencies: Django's and Celery's come along, the ML stack's do not
    assert {"django", "asgiref", "sqlparse", "redis", "celery", "kombu", "channels"} <= kept
    assert {"torch", "transformers", "tokenizers", "huggingface-hub"} <= distributions


def _wait_for_line(process: subprocess.Popen, prefix: str, *, timeout_s: float) -> str | None:
    """The first stdout line of ``process`` that starts with ``prefix``; None when it exits or
    ``timeout_s`` seconds pass first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if not line:
                return None  # the process closed stdout: it exited
            if line.startswith(prefix):
                return line
        elif process.poll() is not None:
            return None
    return None


@pytest.mark.parametrize("runtime", PROGRAMS)
def test_a_sandbox_worker_with_redis_only_grades(runtime, tmp_path):
    modules, _ = image_closure.blocked_modules()
    blocked = tmp_path / "blocked.txt"
    blocked.write_text("\n".join(sorted(modules)))
    admin = redis.Redis.from_url(url_with_db(settings.REDIS_URL, DB))
    admin.flushdb()
    admin.execute_command(
        "ACL", "SETUSER", ACL_USER, "reset", "on", f">{ACL_PASSWORD}", *ACL_RULES.split()
    )
    redis_url = url_with_db(settings.REDIS_URL, DB, user=ACL_USER, password=ACL_PASSWORD)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CRUCIBLE_", "DATABASE_URL", "REDIS_URL", "PROMETHEUS_"))
    }
    # What the sandbox Deployment sets, and a database URL nobody answers (port 9: refused).
    env.update(
        REDIS_URL=redis_url,
        CRUCIBLE_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL="postgres://crucible:x@127.0.0.1:9/crucible",
        PYTHONUNBUFFERED="1",
    )
    client = admin  # the trainer's side: queue requests, read answers
    worker = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "deploy" / "blocked_run.py"),
            str(blocked),
            str(ROOT / "manage.py"),
            "sandbox_worker",
            "--runtime",
            runtime,
            "--concurrency",
            "1",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Queue only once the worker says it serves: its SIGTERM handler (a graceful stop) is
        # installed by then, and no answer can come before it.
        started = _wait_for_line(worker, "sandbox worker ", timeout_s=120)
        assert started, "the sandbox worker printed no start line (exited, or not within 120 s)"
        make, good, bad, tests = PROGRAMS[runtime]
        reply_to = f"{Q.PREFIX}:reply:{uuid.uuid4().hex}"
        for index, program in enumerate((good, bad)):
            message = dict(make(program, tests, "add"), id=f"deploy:{index}", reply_to=reply_to)
            client.lpush(Q.pending_key(runtime), json.dumps(message))
        answers = {}
        deadline = time.monotonic() + 120
        while len(answers) < 2 and time.monotonic() < deadline:
            assert worker.poll() is None, (
                f"the sandbox worker exited: {worker.communicate()[1][-3000:]}"
            )
            popped = client.blpop([reply_to], timeout=2)
            if popped:
                reply = json.loads(popped[1])
                answers[reply["id"]] = reply["result"]
        assert set(answers) == {"deploy:0", "deploy:1"}, (
            "no answer from the sandbox worker within 120 s"
        )
        good_result, bad_result = answers["deploy:0"], answers["deploy:1"]
        assert good_result["status"] == "ok" and [t["passed"] for t in good_result["tests"]] == [
            True,
            True,
        ]
        assert bad_result["status"] == "failed" and not all(
            t["passed"] for t in bad_result["tests"]
        )
        _a_session_round_trip(client, runtime)
    finally:
        worker.send_signal(signal.SIGTERM)  # what Kubernetes sends a pod
        try:
            _out, err = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            _out, err = worker.communicate()
        client.flushdb()
        client.execute_command("ACL", "DELUSER", ACL_USER)
    assert worker.returncode == 0, (
        f"exit {worker.returncode}; stdout: {_out[-1500:]!r}; stderr: {err[-3000:]!r}"
    )
    assert "ModuleNotFoundError" not in err and "Traceback" not in err, err[-3000:]
    assert not list(Path(tmp_path / "var").glob("*.sqlite3"))  # it never opened a database


def _a_session_round_trip(client, runtime: str) -> None:
    """The same pod serves sessions under the same Redis user: open one (its workspace's blob
    read from Redis), run a call in it, close it."""
    workspace = Workspace.from_files({"pod.txt": "served\n"})
    client.set(routing.workspace_key(workspace.digest), workspace.blob, ex=600)
    deadline = time.monotonic() + 60
    while not (slots := routing.live_slots(runtime, client)):
        assert time.monotonic() < deadline, "the worker announced no session slot"
        time.sleep(0.2)
    slot = sorted(slots)[0]
    opened = _send_and_wait(
        client, slot, [{"op": "open", "workspace": workspace.digest}], wait_s=60
    )[0]
    assert "ok" in opened, opened
    session = opened["ok"]["session"]
    # One call at a time, as the client sends a session's calls: the slot's consumer threads
    # take calls sent together at once, so a close sent with the exec may run first.
    ran = _send_and_wait(
        client,
        slot,
        [{"op": "exec", "session": session, "args": {"command": "cat pod.txt"}}],
        wait_s=60,
    )[0]
    assert ran["ok"]["status"] == "ok" and ran["ok"]["stdout"] == "served\n", ran
    closed = _send_and_wait(client, slot, [{"op": "close", "session": session}], wait_s=60)[0]
    assert closed == {"id": "0", "ok": {"closed": True}}


def test_the_sandbox_redis_user_reaches_nothing_else():
    """The same ACL refuses the keys and commands of the rest of Crucible (the check can fail)."""
    admin = redis.Redis.from_url(url_with_db(settings.REDIS_URL, DB))
    admin.execute_command(
        "ACL", "SETUSER", ACL_USER, "reset", "on", f">{ACL_PASSWORD}", *ACL_RULES.split()
    )
    try:
        limited = redis.Redis.from_url(
            url_with_db(settings.REDIS_URL, DB, user=ACL_USER, password=ACL_PASSWORD)
        )
        limited.lpush(Q.pending_key("python"), "x")  # its own keys: fine
        for attempt in (
            lambda: limited.lpush("celery", "x"),  # the Celery broker's queue
            lambda: limited.get("crucible-cache:1:x"),  # the cache
            lambda: limited.keys("*"),  # listing everything
            lambda: limited.flushdb(),
            lambda: limited.publish("crucible.run.1", "x"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attempt()
    finally:
        admin.flushdb()
        admin.execute_command("ACL", "DELUSER", ACL_USER)
