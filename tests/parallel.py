"""The suite on several cores: each pytest-xdist worker is a session of its own (pytest.ini loads
this plugin with ``-p``; ``./crucible test`` runs one worker per core, up to 4).

What a session owns lives under ``settings.VAR_DIR``: the SQLite test database, the embedded
Redis socket (and with it the Celery and execution queues the session's sandbox workers
consume), the sandbox sessions' state and the trainers' checkpoints. Two workers sharing one var
dir would share one Redis and one test database file and flush each other's queues, so each
worker's var dir is a subdirectory of the configured one, named after the worker (``gw0``,
``gw1``...). Where ``REDIS_URL`` names a Redis server (the PostgreSQL profile), worker ``gwN``
takes database ``N`` above the configured one; on PostgreSQL pytest-django gives each worker a
test database of its own (``test_<name>_gwN``).

This runs when pytest imports the plugin: before pytest-django imports ``console.settings``,
which reads the environment once, and before any child process (daphne, a trainer, a Celery
worker) inherits it. xdist sets ``PYTEST_XDIST_WORKER`` in a worker's environment before the
worker's pytest starts; without xdist nothing changes.

Shared on purpose: the content-addressed environment store (``CRUCIBLE_ENVIRONMENT_STORE``: a
file lock per build) and the sdist download cache (``CRUCIBLE_SDIST_CACHE``: a temporary name,
then a rename).

Scheduling (:class:`ModuleScheduling`; ``--no-loadscope-reorder`` in pytest.ini): a test
module runs whole on one worker, so its module fixtures (a corpus graded once, a daphne) are
built once, except the modules of :data:`SPLIT_MODULES`, whose tests share no module fixture and
run a minute or more each. The modules with end-to-end tests (markers ``slow`` and ``browser``)
are handed out first: longest first keeps both workers busy to the end, where collection order
left one worker alone for minutes with the last slow module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.redisdb import db_of, url_with_db

ROOT = Path(__file__).resolve().parent.parent
LONG_MARKERS = ("slow", "browser")
# Each test its own unit of work: every benchmark's quick mode (tests/benchmarks/test_quick.py)
# runs a subprocess of its own, 10 s to 2 min; together they were one 8-minute module.
SPLIT_MODULES = frozenset({"tests/benchmarks/test_quick.py"})


def module_of(nodeid: str) -> str:
    """The test module of a node id: ``tests/a/test_b.py`` of ``tests/a/test_b.py::C::test[x]``."""
    return nodeid.split("::", 1)[0]


def isolate_worker() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = Path(os.environ.get("CRUCIBLE_VAR_DIR") or ROOT / "var")
    os.environ["CRUCIBLE_VAR_DIR"] = str(base / f"xdist-{worker}")
    os.environ.setdefault("CRUCIBLE_ENVIRONMENT_STORE", str(base / "environments"))
    os.environ.setdefault("CRUCIBLE_SDIST_CACHE", str(base / "sdists"))
    if os.environ.get("REDIS_URL"):
        index = int(worker.removeprefix("gw"))
        url = os.environ["REDIS_URL"]
        os.environ["REDIS_URL"] = url_with_db(url, db_of(url) + index)


isolate_worker()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist, the modules holding a slow or browser test first (stable otherwise)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    long_modules = {
        module_of(item.nodeid)
        for item in items
        if any(item.get_closest_marker(name) for name in LONG_MARKERS)
    }
    items.sort(key=lambda item: module_of(item.nodeid) not in long_modules)


class ModuleScheduling(LoadScopeScheduling):
    """xdist's ``loadscope`` with a module as the unit of work (a class of tests goes with its
    module) and each test of :data:`SPLIT_MODULES` a unit of its own."""

    def _split_scope(self, nodeid: str) -> str:
        module = module_of(nodeid)
        return nodeid if module in SPLIT_MODULES else module


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    return ModuleScheduling(config, log)
