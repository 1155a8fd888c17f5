"""Each pytest-xdist worker gets a var dir of its own (pytest.ini loads this plugin with ``-p``).

``./crucible test -n 2`` runs the suite in two worker processes. What a session owns lives under
``settings.VAR_DIR``: the SQLite test database, the embedded Redis socket (and with it the
Celery and execution queues the session's sandbox workers consume), the sandbox sessions' state
and the trainers' checkpoints. Two sessions sharing one var dir would share one Redis and one
test database file and flush each other's queues, so each worker's var dir is a subdirectory of
the configured one, named after the worker (``gw0``, ``gw1``...).

This runs when pytest imports the plugin: before pytest-django imports ``console.settings``,
which reads ``CRUCIBLE_VAR_DIR`` once. xdist sets ``PYTEST_XDIST_WORKER`` in a worker's
environment before the worker's pytest starts; without xdist nothing changes.

Shared on purpose: the content-addressed environment store (``CRUCIBLE_ENVIRONMENT_STORE``)
and the sdist download cache (``CRUCIBLE_SDIST_CACHE``).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def isolate_worker() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = Path(os.environ.get("CRUCIBLE_VAR_DIR") or ROOT / "var")
    os.environ["CRUCIBLE_VAR_DIR"] = str(base / f"xdist-{worker}")
    # What every worker may reuse: built environments (a file lock per build) and downloaded
    # sdists (a temporary name, then a rename).
    os.environ.setdefault("CRUCIBLE_ENVIRONMENT_STORE", str(base / "environments"))
    os.environ.setdefault("CRUCIBLE_SDIST_CACHE", str(base / "sdists"))


isolate_worker()
