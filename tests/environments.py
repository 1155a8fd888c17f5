"""Environments the tests run in, built once per machine into the environment store (a cache
hit on every later run: ``CRUCIBLE_ENVIRONMENT_STORE``, see .ci/run) and shared by the session.

``DATA_PACKAGES``: what the data-analysis task set pins (tasks_library/data/data_analysis.jsonl).
"""

from __future__ import annotations

import atexit
import functools

from sandboxes.environments.build import Materialised, materialise
from sandboxes.environments.mount import mount_for
from sandboxes.environments.spec import parse
from sandboxes.grading import PythonGrader

DATA_PACKAGES = ["numpy==2.4.6", "pandas==3.1.1"]
# What repository tasks run their suites with (tests/sandboxes/repository/test_repository_*.py).
PYTEST_PACKAGES = ["pytest==8.3.4"]
# name -> (runtime, packages): every runtime the adversarial corpus runs in.
ENVIRONMENTS = {
    "host-python3.11": ("python3.11", []),
    "python3.11-numpy-pandas": ("python3.11", DATA_PACKAGES),
    "debian-python3.13": ("python3.13", []),
    "python3.13-numpy-pandas": ("python3.13", DATA_PACKAGES),
    "python3.11-pytest": ("python3.11", PYTEST_PACKAGES),
}


@functools.cache
def built(name: str) -> Materialised:
    """The named environment, built (or found) in the store."""
    runtime, packages = ENVIRONMENTS[name]
    return materialise(parse(runtime, packages))


@functools.cache
def grader(name: str) -> PythonGrader:
    """A resident grader of this process in the named environment, stopped at exit."""
    environment = built(name)
    started = PythonGrader(mount_for(environment.request_field()))
    atexit.register(started.close)
    return started


# The Debian packages of the terminal task sets' environments (tasks_library/data/terminal):
# the terminal sessions' tests run in the same root, so it is built once.
TERMINAL_DEBIAN_PACKAGES = ["cron", "jq", "logrotate", "nginx-light", "redis-server", "sqlite3"]
