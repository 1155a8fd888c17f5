"""Fixtures shared by the sandbox tests."""

import contextlib
import threading
import time
from types import SimpleNamespace

import pytest

from sandboxes import queue as Q
from sandboxes.sessions import routing
from sandboxes.worker import SandboxWorker


@pytest.fixture
def runtime():
    """A runtime name of this test alone, so the session's workers and trainers do not count in its
    queue, worker or demand keys; its keys are deleted afterwards."""
    name = f"isolated-runtime-{time.monotonic_ns()}"
    yield name
    client = Q.connection()
    for key in client.scan_iter(f"{Q.PREFIX}:{name}:*"):
        client.delete(key)


@contextlib.contextmanager
def started_session_pool(store_parent, name: str):
    """A sandbox worker holding sessions (2 session slots, no queue slots) on the runtime name
    ``name``, served in this process; stopped afterwards, its keys deleted. A name
    ``python3.13@...`` holds its sessions in that runtime's Debian root (the part before ``@``
    names the runtime)."""
    worker = SandboxWorker(
        runtime=name,
        concurrency=0,
        session_slots=2,
        store_parent=store_parent,
    )
    thread = threading.Thread(target=worker.serve, name=f"worker-{name}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while len(routing.live_slots(name)) < 2 or not all(
        s.ready.is_set() for s in worker.session_slots
    ):
        assert thread.is_alive(), "the session worker stopped while starting"
        assert time.monotonic() < deadline, "the session worker did not start within 120 s"
        time.sleep(0.05)
    try:
        yield SimpleNamespace(runtime=name, worker=worker)
    finally:
        worker.stopping.set()
        thread.join(timeout=60)
        client = Q.connection()
        for key in client.scan_iter(f"{Q.PREFIX}:{name}:*"):
            client.delete(key)


@pytest.fixture(scope="module")
def session_pool(tmp_path_factory):
    """A sandbox worker of this module alone that holds sessions (2 session slots, no queue
    slots) on a runtime name of its own, served in this process, so a test can see its
    sessions' processes, cgroups and workspace store on the host. Stopped afterwards, its
    keys deleted."""
    with started_session_pool(
        tmp_path_factory.mktemp("session-stores"), f"sessions-{time.monotonic_ns()}"
    ) as pool:
        yield pool
