"""A ``sandbox_worker`` killed with SIGKILL while it holds sessions: their next calls are
``infra_error`` naming each session, and nothing of them is left on the host (processes,
cgroups, the worker's workspace store, its slots in Redis). A session zygote killed alone
takes its sessions with it and is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from sandboxes import result as R
from sandboxes.sessions import SessionLimits, SessionLost, Workspace, open_session, routing
from sandboxes.worker import SandboxWorker
from tests.sandboxes.sessioncheck import cgroup_exists, pid_namespace, processes_in, wait_until

WORKSPACE = Workspace.from_files({"kill.txt": "before\n"})


def _start_worker() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "sandbox_worker",
            "--concurrency",
            "1",
            "--session-slots",
            "2",
        ],
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    banner = proc.stdout.readline()
    assert banner.startswith("sandbox worker "), banner
    return proc, banner.split()[2].rstrip(":")


def test_kill_9_of_a_worker_holding_sessions_loses_them_cleanly():
    proc, name = _start_worker()
    try:
        slots = [f"{name}-s0", f"{name}-s1"]
        assert wait_until(lambda: set(slots) <= set(routing.live_slots("python")), 30)
        sessions = [open_session(WORKSPACE, slot=slots[i % 2]) for i in range(3)]
        keeper = open_session(WORKSPACE, slot=slots[1], limits=SessionLimits(keep_processes=True))
        assert keeper.exec("sleep 1000 > /dev/null 2>&1 &").status == R.OK
        everyone = [*sessions, keeper]
        for session in everyone:
            assert session.exec("echo alive").stdout == "alive\n"
        namespaces = [pid_namespace(s.pid) for s in everyone]
        assert len(processes_in(namespaces[-1])) >= 2, "the kept daemon should be running"
        store = Path(settings.VAR_DIR) / "sandbox-sessions" / name
        assert store.is_dir()
        proc.kill()
        proc.wait()

        for session in everyone:
            result = session.exec("echo after")
            assert result.status == R.INFRA_ERROR, result
            assert session.id in result.detail and "lost" in result.detail
            with pytest.raises(SessionLost) as lost:
                session.read("kill.txt")
            assert session.id in str(lost.value)

        # Its sessions died with it (PDEATHSIG: worker -> zygote -> each session's init).
        for session, namespace in zip(everyone, namespaces, strict=True):
            assert wait_until(
                lambda s=session, n=namespace: (
                    not Path(f"/proc/{s.pid}").exists() and not processes_in(n)
                ),
                10,
            ), f"processes of {session.id} outlived their worker"
        # A live worker's reaper frees what the dead one left on this host.
        SandboxWorker(runtime="python", concurrency=1, session_slots=0).reap()
        assert wait_until(lambda: not any(cgroup_exists(s.cgroup) for s in everyone), 10)
        assert not store.exists(), "the dead worker's workspace store is still there"
        assert not set(slots) & set(routing.live_slots("python"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_call_to_a_slot_that_died_earlier_is_lost_not_hung():
    proc, name = _start_worker()
    slot = f"{name}-s0"
    try:
        assert wait_until(lambda: slot in routing.live_slots("python"), 30)
        session = open_session(WORKSPACE, slot=slot)
        proc.kill()
        proc.wait()
        started = time.monotonic()
        result = session.exec("true")
        assert result.status == R.INFRA_ERROR and session.id in result.detail
        assert time.monotonic() - started < 15  # the heartbeat's TTL, not a hang
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_killed_session_zygote_loses_its_sessions_and_is_replaced(session_pool):
    slot = session_pool.worker.session_slots[0]
    session = open_session(WORKSPACE, runtime=session_pool.runtime, slot=slot.slot_id)
    assert session.exec("true").status == R.OK
    old = slot.host.zygote.process.pid
    os.kill(old, signal.SIGKILL)  # its sessions' inits die with it (PDEATHSIG)
    result = session.exec("true")
    assert result.status == R.INFRA_ERROR and session.id in result.detail
    assert wait_until(lambda: slot.host.zygote.alive and slot.host.zygote.process.pid != old, 10)
    with open_session(WORKSPACE, runtime=session_pool.runtime, slot=slot.slot_id) as fresh:
        assert fresh.exec("cat kill.txt").stdout == "before\n"
