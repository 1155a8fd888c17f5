"""Readiness of a web server's worker processes: ready once every one of them is warm.

A web server (granian) starts ``CRUCIBLE_WEB_WORKER_COUNT`` worker processes that share one
listening socket. Each worker imports the application, warms itself (``console/warmup.py``) and
only then accepts connections, so the first worker to answer ``/healthz`` may be the only warm
one: a load balancer or a benchmark that starts sending then puts every keep-alive connection on
it, and the others' warm-up (about a second of CPU each) competes with the traffic. So each warm
worker leaves a marker, ``<CRUCIBLE_WEB_READY_DIR>/<parent pid>-<pid>``, and ``/healthz`` (the
readiness probe) reports ``workers`` ``"ok"`` only when every worker of its server has one.

The server's launcher (``manage.py serve``, ``crucible up``'s stack) makes the directory and sets
both variables (:func:`server_environment`); a process started otherwise (tests, ``runserver``)
has neither and is ready as soon as it answers. A marker names the server (its parent pid) and
the worker, and counts only while that worker lives, so a worker that died and was respawned, or
a directory that outlived its container, is never taken for a warm worker.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

READY_DIR_ENV = "CRUCIBLE_WEB_READY_DIR"
WORKER_COUNT_ENV = "CRUCIBLE_WEB_WORKER_COUNT"


def server_environment(workers: int, parent: Path | None = None) -> dict[str, str]:
    """The variables a web server of ``workers`` worker processes is started with: a fresh,
    private ready directory (in ``parent``, default ``$TMPDIR``) and the count.

    Raises:
        OSError: the directory cannot be made.
    """
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    ready_dir = tempfile.mkdtemp(prefix="crucible-web-ready-", dir=parent)
    return {READY_DIR_ENV: ready_dir, WORKER_COUNT_ENV: str(int(workers))}


def launched() -> bool:
    """Whether this process is a worker of a server started with :func:`server_environment`."""
    return bool(os.environ.get(READY_DIR_ENV) and os.environ.get(WORKER_COUNT_ENV))


def mark_ready() -> None:
    """Leave this worker's marker (no-op where the server set no ready directory). Called once
    the worker is warm, before it serves."""
    ready_dir = os.environ.get(READY_DIR_ENV)
    if ready_dir:
        (Path(ready_dir) / f"{os.getppid()}-{os.getpid()}").touch()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def workers() -> str:
    """``"ok"`` when every worker of this process's server is warm (or the server set no ready
    directory), else ``"warming: K of N workers ready"``."""
    if not launched():
        return "ok"
    ready_dir, expected = os.environ[READY_DIR_ENV], os.environ[WORKER_COUNT_ENV]
    server = os.getppid()
    ready = 0
    try:
        names = os.listdir(ready_dir)
    except OSError as exc:
        return f"warming: the ready directory {ready_dir} cannot be read: {exc.strerror}"
    for name in names:
        parent, _, pid = name.partition("-")
        if parent == str(server) and pid.isdigit() and _alive(int(pid)):
            ready += 1
    if ready >= int(expected):
        return "ok"
    return f"warming: {ready} of {expected} workers ready"
