"""The elastic sandbox pool for real: ``sandbox_worker --min-workers 1 --max-workers 3`` supervising
real worker processes over the session's Redis (in a database of its own, so the session's resident
workers take none of these requests) follows a trainer's announced demand and a burst of real
executions up to the ceiling and back to the floor, and loses no execution on the way: not when
it drains a worker, not when a worker is killed with SIGKILL mid-execution."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis
from django.conf import settings
from django.test import Client

from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes import result as R
from tests.redisdb import isolated_db, url_with_db

ISOLATED_DB = isolated_db(14)  # not the database the session's workers consume
TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"


def slow_square(seconds: float) -> dict:
    return Q.python_tests(
        f"import time\ndef square(x):\n    time.sleep({seconds})\n    return x * x\n",
        TESTS,
        "square",
    )


@pytest.fixture
def isolated_queue(settings):
    """This test's queue: the session's Redis, database :data:`ISOLATED_DB`, emptied before and
    after."""
    url = url_with_db(settings.REDIS_URL, ISOLATED_DB)
    client = redis.Redis.from_url(url)
    client.flushdb()
    settings.REDIS_URL = url
    Q.connection.cache_clear()
    yield url
    Q.connection.cache_clear()
    client.flushdb()


def start(url: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_worker", "--runtime", "python", *args],
        cwd=settings.BASE_DIR,
        env={**os.environ, "REDIS_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    first = proc.stdout.readline()
    assert "sandbox" in first, first + proc.stdout.read() if proc.poll() is not None else first
    return proc


def state() -> dict:
    raw = Q.connection().get(D.autoscaler_key("python"))
    return json.loads(raw) if raw else {}


def wait_for(check, what: str, seconds: float = 30.0):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, (
            f"not reached within {seconds:.0f} s: {what}; autoscaler state {state()}"
        )
        time.sleep(0.05)


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError("the autoscaler did not stop on SIGTERM within 60 s") from None
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is gone for our purpose
        return handle.read().split(") ")[-1][0] != "Z"


def floor_reached(st: dict) -> bool:
    return st.get("workers") == 1 and st.get("draining") == 0 and st.get("slots") == 2


@pytest.mark.django_db
def test_pool_follows_announced_demand_and_a_burst_up_to_the_ceiling_and_back(isolated_queue):
    proc = start(
        isolated_queue,
        "--min-workers",
        "1",
        "--max-workers",
        "3",
        "--concurrency",
        "2",
        "--scale-interval",
        "0.2",
        "--scale-down-delay",
        "1.5",
        "--drain-timeout",
        "30",
    )
    pids: set[int] = set()
    try:
        wait_for(lambda: floor_reached(state()), "the floor: one worker of two slots")

        # A trainer announces a rollout of 6 executions before queueing anything: 3 workers.
        D.publish("run-1-rank-0", phase="rollout", demand={"python": 6})
        st = wait_for(
            lambda: (s := state()).get("slots") == 6 and s,
            "three workers for an announced demand of 6",
        )
        assert st["workers"] == 3 and st["published"] == 6 and st["depth"] == 0
        pids |= set(st["worker_pids"])
        # the console's pool API (and a KEDA metrics-api scaler) sees the demand and the autoscaler
        python = Client().get("/api/sandboxes/pool/").json()["runtimes"]["python"]
        assert python["demand"]["trainers"] == {"run-1-rank-0": {"phase": "rollout", "demand": 6}}
        assert python["demand"]["total"] == 6 and python["workers"]["alive"] == 6
        assert python["autoscaler"]["workers"] == 3 and python["autoscaler"]["max_workers"] == 3
        D.publish("run-1-rank-0", phase="update", demand={"python": 0})
        wait_for(lambda: floor_reached(state()), "back to the floor when the trainer updates")

        # A burst of 12 real executions (2 s each: 12 s on the floor's two slots, time enough to
        # start two workers on a busy machine): the queue alone drives the pool to the ceiling.
        batch = Q.submit([slow_square(2.0) for _ in range(12)])
        peak = wait_for(
            lambda: (s := state()).get("slots") == 6 and s, "three workers for a queue of 12"
        )
        assert peak["workers"] == 3 and peak["target"] == 3 and peak["published"] == 0
        pids |= set(peak["worker_pids"])
        results = batch.wait(timeout_s=90)
        assert [r.status for r in results] == [R.OK] * 12, [
            r.detail for r in results if r.status != R.OK
        ]
        assert all(r.tests_passed == 2 for r in results)
        wait_for(
            lambda: floor_reached(state()), "back to the floor after the burst and the cool-down"
        )
        client = Q.connection()
        assert client.llen(Q.pending_key("python")) == 0
        assert not any(
            client.llen(Q.processing_key(w.decode()))
            for w in client.smembers(Q.workers_key("python"))
        )
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert not any(alive(pid) for pid in pids), "a worker process outlived its autoscaler"
    assert not Q.connection().exists(D.autoscaler_key("python"))


def test_a_worker_killed_mid_execution_is_replaced_and_what_it_held_runs_again(isolated_queue):
    proc = start(
        isolated_queue,
        "--min-workers",
        "1",
        "--max-workers",
        "1",
        "--concurrency",
        "2",
        "--scale-interval",
        "0.2",
    )
    try:
        st = wait_for(lambda: (s := state()).get("slots") == 2 and s, "one worker of two slots")
        victim = st["worker_pids"][0]
        batch = Q.submit([slow_square(2.0) for _ in range(2)])
        client = Q.connection()

        def held() -> int:
            return sum(
                client.llen(Q.processing_key(w.decode()))
                for w in client.smembers(Q.workers_key("python"))
            )

        wait_for(lambda: held() == 2, "the worker holds both requests")
        os.kill(victim, signal.SIGKILL)
        # The supervisor requeues them at once (not after the 10 s heartbeat TTL), retry count
        # raised.
        requeued = wait_for(
            lambda: client.lrange(Q.pending_key("python"), 0, -1) if held() == 0 else None,
            "both requests back on the queue",
            seconds=5,
        )
        assert len(requeued) == 2 and all(json.loads(r)["attempt"] == 1 for r in requeued)
        results = batch.wait(timeout_s=60)
        assert [r.status for r in results] == [R.OK, R.OK], [r.detail for r in results]
        replacement = wait_for(
            lambda: (s := state()).get("slots") == 2 and s["worker_pids"], "a replacement"
        )
        assert victim not in replacement
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out


def test_a_drained_worker_answers_what_it_holds_before_it_exits(isolated_queue):
    """The drain the autoscaler relies on: SIGTERM to a busy worker finishes its in-flight
    executions."""
    proc = start(isolated_queue, "--concurrency", "2")
    try:
        batch = Q.submit([slow_square(1.5) for _ in range(2)])
        client = Q.connection()
        wait_for(
            lambda: (
                sum(
                    client.llen(Q.processing_key(w.decode()))
                    for w in client.smembers(Q.workers_key("python"))
                )
                == 2
            ),
            "the worker holds both",
        )
        proc.send_signal(signal.SIGTERM)
        results = batch.wait(timeout_s=30)
    finally:
        out = stop(proc)
    assert proc.returncode == 0, out
    assert [r.status for r in results] == [R.OK, R.OK], [r.detail for r in results]
    assert (
        client.llen(Q.pending_key("python")) == 0
    )  # answered by the draining worker, not requeued
