"""Fixtures shared by the sandbox tests."""

import time

import pytest

from sandboxes import queue as Q


@pytest.fixture
def runtime():
    """A runtime name of this test alone, so the session's workers and trainers do not count in its
    queue, worker or demand keys; its keys are deleted afterwards."""
    name = f"isolated-runtime-{time.monotonic_ns()}"
    yield name
    client = Q.connection()
    for key in client.scan_iter(f"{Q.PREFIX}:{name}:*"):
        client.delete(key)
