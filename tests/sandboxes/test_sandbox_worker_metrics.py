"""A real ``sandbox_worker`` with CRUCIBLE_METRICS_PORT serves its execution metrics over HTTP:
executions by runtime, kind and status, the latency histogram in ms, slots and busy slots; the
local autoscaler serves its worker processes' metrics on one port (prometheus_client's
multiprocess files). Each worker gets a Redis of its own, so it answers every request sent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sandboxes import queue as Q
from sandboxes import result as R
from tests.metrics import private_redis, scrape, value, wait_for
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"


def start_worker(var: Path, port: int, *flags: str) -> subprocess.Popen:
    env = {**os.environ, "CRUCIBLE_VAR_DIR": str(var), "CRUCIBLE_METRICS_PORT": str(port)}
    env.pop("REDIS_URL", None)  # the private embedded Redis of ``var``
    return subprocess.Popen(
        [sys.executable, "manage.py", "sandbox_worker", "--runtime", "python", *flags],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    return out


def run_two() -> list[R.ExecutionResult]:
    """One passing and one failing solution through the queue."""
    results = Q.run_many(
        [
            Q.python_tests("def square(x):\n    return x * x\n", TESTS, "square"),
            Q.python_tests("def square(x):\n    return x + x\n", TESTS, "square"),
        ]
    )
    assert [r.status for r in results] == [R.OK, R.FAILED]
    return results


def test_a_sandbox_worker_counts_its_executions_on_its_metrics_port():
    port = free_port()
    with private_redis() as var:
        worker = start_worker(var, port, "--concurrency", "1")
        try:
            wait_for(lambda: Q.live_workers("python") == 1, what="the sandbox worker")
            before = scrape(port)
            assert (
                value(
                    before,
                    "crucible_sandbox_executions_total",
                    runtime="python",
                    kind="python_tests",
                    status="ok",
                )
                is None
            )
            assert value(before, "crucible_sandbox_slots", runtime="python") == 1
            run_two()
            # the slot leaves its busy gauge just after its reply is pushed: the client can
            # read the answer a moment before the gauge drops back
            wait_for(
                lambda: value(scrape(port), "crucible_sandbox_busy_slots", runtime="python") == 0,
                timeout_s=10,
                what="the slot idle again",
            )
            text = scrape(port)
        finally:
            out = stop(worker)
    assert worker.returncode == 0, out
    assert (
        value(
            text,
            "crucible_sandbox_executions_total",
            runtime="python",
            kind="python_tests",
            status="ok",
        )
        == 1
    )
    assert (
        value(
            text,
            "crucible_sandbox_executions_total",
            runtime="python",
            kind="python_tests",
            status="failed",
        )
        == 1
    )
    assert value(text, "crucible_sandbox_execution_latency_ms_count", runtime="python") == 2
    assert 0 < value(text, "crucible_sandbox_execution_latency_ms_sum", runtime="python") < 60_000
    assert (
        value(text, "crucible_sandbox_execution_latency_ms_bucket", runtime="python", le="60000.0")
        == 2
    )
    assert value(text, "crucible_sandbox_busy_slots", runtime="python") == 0  # both answered
    assert value(text, "process_resident_memory_bytes") > 0  # prometheus_client's process metrics


def test_the_autoscaler_serves_its_worker_processes_metrics():
    port = free_port()
    with private_redis() as var:
        supervisor = start_worker(
            var, port, "--concurrency", "1", "--min-workers", "1", "--max-workers", "1"
        )
        try:
            wait_for(lambda: Q.live_workers("python") == 1, what="the autoscaler's worker")
            run_two()
            text = scrape(port)
        finally:
            out = stop(supervisor)
    assert supervisor.returncode == 0, out
    assert "cannot serve metrics" not in out  # the worker process did not try the supervisor's port
    assert (
        value(
            text,
            "crucible_sandbox_executions_total",
            runtime="python",
            kind="python_tests",
            status="ok",
        )
        == 1
    )
    assert value(text, "crucible_sandbox_execution_latency_ms_count", runtime="python") == 2
    assert value(text, "crucible_sandbox_slots", runtime="python") == 1


def test_a_bad_metrics_port_stops_the_worker_with_a_message():
    env = {**os.environ, "CRUCIBLE_METRICS_PORT": "ninety"}
    done = subprocess.run(
        [sys.executable, "manage.py", "sandbox_worker", "--concurrency", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "CRUCIBLE_METRICS_PORT='ninety' is not a port number" in done.stderr
    assert "Traceback" not in done.stderr
