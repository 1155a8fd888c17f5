"""Ports for the servers a test starts (daphne, metrics endpoints, a private Redis), and waiting
for one to answer."""

from __future__ import annotations

import socket
import time
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, picked by the kernel from the ephemeral
    range: tests running at once in other pytest-xdist workers each get their own, where a scan
    from a fixed port up would hand two of them the same one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_answering(proc, url: str, *, seconds: float = 60.0) -> None:
    """Wait until ``url`` answers 2xx (a server ``proc`` started), asserting that ``proc`` is
    still alive (its output in the message when it is not) and that it answers within
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.stdout.read().decode()
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                response.read()
            return
        except OSError:  # not listening yet, or not ready (an HTTP error is an OSError too)
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
