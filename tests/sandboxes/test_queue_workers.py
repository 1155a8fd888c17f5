"""The execution queue and its resident workers, over the real Redis and real sandboxes:
answers come back in order, and a worker (or one of its sandboxes) killed with SIGKILL in
the middle of a batch loses no request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
from django.conf import settings
from django.core.management import CommandError, call_command

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.worker import SandboxWorker

TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
SLOW_SQUARE = "import time\ndef square(x):\n    time.sleep(0.2)\n    return x * x\n"


def square_request(program: str = SLOW_SQUARE) -> dict:
    return Q.python_tests(program, TESTS, "square")


def test_results_come_back_in_request_order():
    programs = [
        "def square(x):\n    return x * x\n",
        "def square(x):\n    return x + x\n",
        "def square(x)\n",
    ]
    results = Q.run_many([square_request(p) for p in programs])
    assert [r.status for r in results] == [R.OK, R.FAILED, R.FAILED]
    assert [r.tests_passed for r in results] == [2, 1, 0]
    assert "SyntaxError" in results[2].detail


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (each slot thread starts its own sandboxes)."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children += [int(p) for p in handle.read().split()]
        except OSError:
            pass
    return children


def _start_worker(concurrency: int = 2) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_worker", "--concurrency", str(concurrency)],
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert "sandbox worker" in proc.stdout.readline()
    return proc


def _batch_in_background(requests: list[dict]) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.extend(Q.run_many(requests)), daemon=True)
    thread.start()
    return thread, out


def _wait_until(check, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def _holds_requests(proc: subprocess.Popen) -> bool:
    client = Q.connection()
    ids = [w.decode() for w in client.smembers(Q.workers_key("python"))]
    mine = [w for w in ids if f"-{proc.pid}-" in w]
    return any(client.llen(Q.processing_key(w)) for w in mine)


def test_kill_9_of_a_worker_mid_batch_loses_no_request():
    worker = _start_worker()
    try:
        thread, results = _batch_in_background([square_request() for _ in range(24)])
        _wait_until(lambda: _holds_requests(worker))
        zygotes = _children(worker.pid)
        assert zygotes, "the worker should hold warm sandboxes"
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        thread.join(timeout=120)
        assert not thread.is_alive(), "the batch never finished"
        assert [r.status for r in results] == [R.OK] * 24, [
            (r.detail, r.stderr, r.signal, r.exit_code) for r in results if r.status != R.OK
        ]
        # The dead worker's sandboxes died with it (PDEATHSIG), not orphaned.
        _wait_until(lambda: not any(os.path.exists(f"/proc/{z}") for z in zygotes), seconds=5)
    finally:
        if worker.poll() is None:
            worker.kill()


def test_kill_9_of_a_sandbox_mid_execution_retries_on_another():
    worker = _start_worker(concurrency=1)
    try:
        thread, results = _batch_in_background([square_request() for _ in range(12)])
        _wait_until(lambda: _holds_requests(worker))
        for zygote in _children(worker.pid):
            os.kill(zygote, signal.SIGKILL)
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert [r.status for r in results] == [R.OK] * 12
        assert worker.poll() is None, "losing a sandbox must not take the worker down"
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_request_whose_worker_died_twice_is_infra_error_not_a_failure():
    client = Q.connection()
    dead = f"dead-worker-{os.getpid()}"
    reply_to = f"{Q.PREFIX}:reply:test-{os.getpid()}"
    message = dict(square_request(), id="twice", reply_to=reply_to, attempt=1)
    client.delete(reply_to)
    client.rpush(Q.processing_key(dead), json.dumps(message))
    client.sadd(Q.workers_key("python"), dead)
    assert (
        SandboxWorker(runtime="python", concurrency=1).reap() >= 1
    )  # no heartbeat: requeued, attempt 2
    popped = client.blpop([reply_to], timeout=30)
    assert popped is not None, "no worker answered the requeued request"
    reply = json.loads(popped[1])
    assert reply["id"] == "twice"
    assert reply["result"]["status"] == R.INFRA_ERROR
    assert "died" in reply["result"]["detail"]
    assert not client.sismember(Q.workers_key("python"), dead)


def test_no_worker_for_a_runtime_is_a_clear_infra_error(monkeypatch):
    monkeypatch.setattr(Q, "NO_WORKER_GRACE_S", 0.0)
    result = Q.run_many([Q.request("python_tests", {}, runtime="cobol")])[0]
    assert result.status == R.INFRA_ERROR
    assert "sandbox_worker --runtime cobol" in result.detail
    Q.connection().delete(Q.pending_key("cobol"))


@pytest.mark.parametrize("bad", [0, -1])
def test_sandbox_worker_refuses_bad_concurrency(bad):
    with pytest.raises(
        CommandError, match=r"--concurrency( must be at least 1|: must be an integer from 0)"
    ):
        call_command("sandbox_worker", "--concurrency", str(bad))


def test_sandbox_worker_alone_starts_and_stops_its_own_redis(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["CRUCIBLE_VAR_DIR"] = str(tmp_path)  # a var dir where no Redis runs yet
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_worker", "--concurrency", "1"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert "sandbox worker" in proc.stdout.readline()
        assert (tmp_path / "redis.sock").exists()
        time.sleep(1)
        assert proc.poll() is None, proc.stdout.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    assert not (tmp_path / "redis.sock").exists() or not _redis_answers(tmp_path / "redis.sock")


def _redis_answers(sock) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def test_a_malformed_request_is_dropped_and_the_worker_keeps_serving():
    client = Q.connection()
    client.rpush(Q.pending_key("python"), b"{not json")
    client.rpush(
        Q.pending_key("python"), json.dumps({"kind": "python_tests"})
    )  # no id, no reply_to
    result = Q.run_many([square_request("def square(x):\n    return x * x\n")])[0]
    assert result.status == R.OK
    assert client.llen(Q.pending_key("python")) == 0
