"""Ports for the servers a test starts (daphne, metrics endpoints, a private Redis)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on, picked by the kernel from the ephemeral
    range: tests running at once in other pytest-xdist workers each get their own, where a scan
    from a fixed port up would hand two of them the same one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
