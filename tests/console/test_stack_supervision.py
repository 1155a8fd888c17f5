"""What a stack starts is supervised: a service that dies is restarted with a growing back-off,
the children it left behind (a Celery worker's embedded beat) are stopped before it starts again,
and closing the stack stops every process of every service, including orphans of a leader that
died. Real processes and signals; the "service" forks a child as ``celery worker --beat`` does."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from console.management import stack as stack_module
from console.management.stack import Stack

SERVICE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "a") as out:
    out.write(f"{os.getpid()} {child.pid}\\n")
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its parent) is not alive
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def starts(pids: Path, count: int, timeout_s: float = 20.0) -> list[tuple[int, int]]:
    """The (leader, child) pids of the first ``count`` starts, waiting for them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = pids.read_text().split("\n") if pids.exists() else []
        rows = [tuple(map(int, line.split())) for line in lines if line.strip()]
        if len(rows) >= count:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"{count} starts expected, {pids.read_text() if pids.exists() else 0}")


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pids(tmp_path) -> Path:
    return tmp_path / "pids"


def test_a_dead_service_is_restarted_with_back_off_and_its_orphans_stopped(pids):
    with Stack(supervise=True) as stack:
        stack._spawn("test-supervised", [sys.executable, "-c", SERVICE, str(pids)])
        ((leader, child),) = starts(pids, 1)
        killed_at = time.monotonic()
        os.kill(leader, signal.SIGKILL)  # the worker dies; its beat-like child would stay
        rows = starts(pids, 2)
        first_restart_s = time.monotonic() - killed_at
        assert not alive(child), "the dead service's child was left running beside the new one"
        assert stack.restarts == {"test-supervised": 1}
        assert first_restart_s >= stack_module.RESTART_BACKOFF_S

        killed_at = time.monotonic()
        os.kill(rows[1][0], signal.SIGKILL)  # dies again at once: the back-off doubles
        rows = starts(pids, 3)
        assert time.monotonic() - killed_at >= 2 * stack_module.RESTART_BACKOFF_S
        assert stack.restarts == {"test-supervised": 2}
        leader, child = rows[2]
        assert alive(leader) and alive(child)
        log = (stack_module.log_dir() / "test-supervised.log").read_text()
        assert "test-supervised restarted after exit -9 (restart 2)" in log
    # closing the stack stops the whole tree of the service it restarted
    assert gone(leader) and gone(child)


def test_closing_a_stack_stops_the_orphans_of_a_service_that_died(pids):
    with Stack() as stack:  # not supervised: nothing restarts, but nothing is left behind
        stack._spawn("test-unsupervised", [sys.executable, "-c", SERVICE, str(pids)])
        ((leader, child),) = starts(pids, 1)
        os.kill(leader, signal.SIGKILL)
        assert gone(leader)
        time.sleep(2 * stack_module.SUPERVISE_POLL_S)
        assert alive(child) and stack.restarts == {}
    assert gone(child)
