"""The console's web server stops on SIGTERM in bounded time even when a worker does not:
granian's main process kills a worker that has not stopped WEB_WORKER_KILL_TIMEOUT_S after the
signal (granian's own shutdown can deadlock a worker: emmett-framework/granian#875), so `up`,
a pod's stop and every test that starts a server end instead of waiting forever."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from console.management.stack import WEB_WORKER_KILL_TIMEOUT_S, web_server_argv
from tests.ports import free_port, wait_answering

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_a_worker_that_refuses_to_stop_is_killed_and_the_server_exits():
    port = free_port()
    app = "tests.console.worker_that_refuses_to_stop:application"
    argv = web_server_argv("127.0.0.1", port, workers=1, app=app)
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        # the request that makes the worker unable to exit on its own
        wait_answering(proc, f"http://127.0.0.1:{port}/")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=WEB_WORKER_KILL_TIMEOUT_S + 20)[0]
        took = time.monotonic() - started
    finally:
        # the whole group: a worker left behind by a main process that hung would outlive it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    # it waited for the worker, then killed it (granian says so), and did not wait much longer
    assert took >= WEB_WORKER_KILL_TIMEOUT_S - 0.5, (took, output[-2000:])
    assert took < WEB_WORKER_KILL_TIMEOUT_S + 15, (took, output[-2000:])
    assert b"refused to gracefully stop" in output, output[-2000:]
