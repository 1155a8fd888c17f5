"""A session nobody closes is closed by its lease: idle timeout or maximum lifetime. Its next call
is an ``infra_error`` naming it, and nothing of it remains."""

from __future__ import annotations

import time

import pytest

from sandboxes import result as R
from sandboxes.sessions import SessionLimits, SessionLost, Workspace, open_session
from tests.sandboxes.sessioncheck import pid_namespace, session_gone

WORKSPACE = Workspace.from_files({"lease.txt": "x\n"})


def test_an_abandoned_session_is_reaped_by_its_idle_timeout(session_pool):
    limits = SessionLimits(idle_timeout_s=1.0)
    session = open_session(WORKSPACE, limits=limits, runtime=session_pool.runtime)
    pid, namespace, cgroup = session.pid, pid_namespace(session.pid), session.cgroup
    assert session.exec("true").status == R.OK
    # never closed: the worker's lease must end it (checked at least once a second)
    assert session_gone(pid, namespace, cgroup, seconds=15), "the idle session was not reaped"
    result = session.exec("true")
    assert result.status == R.INFRA_ERROR
    assert session.id in result.detail and "idle" in result.detail
    with pytest.raises(SessionLost) as lost:
        session.read("lease.txt")
    assert lost.value.status == R.INFRA_ERROR and session.id in str(lost.value)


def test_a_busy_session_is_closed_at_its_maximum_lifetime(session_pool):
    limits = SessionLimits(max_lifetime_s=2.0)
    session = open_session(WORKSPACE, limits=limits, runtime=session_pool.runtime)
    pid, namespace, cgroup = session.pid, pid_namespace(session.pid), session.cgroup
    deadline = time.monotonic() + 15
    while (result := session.exec("true")).status == R.OK:
        assert time.monotonic() < deadline, "the session outlived its maximum lifetime"
        time.sleep(0.2)
    assert result.status == R.INFRA_ERROR
    assert session.id in result.detail and "maximum lifetime" in result.detail
    assert session_gone(pid, namespace, cgroup)


def test_a_call_longer_than_the_idle_timeout_is_not_cut(session_pool):
    limits = SessionLimits(idle_timeout_s=1.0)
    with open_session(WORKSPACE, limits=limits, runtime=session_pool.runtime) as session:
        result = session.exec("sleep 2.5; echo done", timeout_s=10)
        assert result.status == R.OK and result.stdout == "done\n"
