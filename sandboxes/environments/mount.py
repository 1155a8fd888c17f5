"""A worker's side of an environment: the store, and how zygotes see a built environment.

Standard library only (graders run on the system's Python in tests/sandboxes/test_not_root.py).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.environments import debian
from sandboxes.environments.store import EnvironmentStore

NODE_MODULES = "node_modules"
SITE_PACKAGES = "site-packages"
PACKAGES_INSIDE = "/env"  # where a packages layer is bound in a sandbox
# Numerical libraries start a thread per core at import; a sandbox's execution gets one core's
# worth of CPU time and is forked from a zygote, where threads do not survive.
THREAD_CAPS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def store_root() -> Path:
    """``CRUCIBLE_ENVIRONMENT_STORE``, else ``environments/`` under the var directory."""
    from django.conf import settings  # noqa: PLC0415 (the store is usable before Django is set up)

    return Path(settings.ENVIRONMENT_STORE)


@functools.lru_cache(maxsize=4)
def _store(root: str) -> EnvironmentStore:
    return EnvironmentStore(Path(root))


def store() -> EnvironmentStore:
    """This process's store (one object per root, so verification happens once per process)."""
    return _store(str(store_root()))


@dataclass(frozen=True)
class Mount:
    """How a worker's zygotes see one environment (the ``Zygote`` fields it sets)."""

    key: str
    launcher: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)  # system_root, mounts, python_path, environ

    @property
    def host_root(self) -> bool:
        return "system_root" not in self.config


HOST = Mount("host")


def mount_for(environment: dict | None, *, family: str = "python") -> Mount:
    """The :class:`Mount` of a request's ``environment`` field, its layers verified against
    their manifests on this worker's first use.

    Raises:
        EnvironmentCorrupt: a layer is not built here or differs from its manifest.
    """
    if not environment or not (environment.get("root") or environment.get("packages")):
        return HOST
    target = store()
    config: dict = {"environ": dict(THREAD_CAPS)}
    launcher: list[str] = []
    if environment.get("root"):
        root = target.verify(environment["root"])
        config["system_root"] = os.fspath(root.tree)
        launcher = debian.launcher(root.tree, environment["runtime"])
    if environment.get("packages"):
        packages = target.verify(environment["packages"])
        config["mounts"] = [[os.fspath(packages.tree), PACKAGES_INSIDE]]
        if family == "node":
            config["environ"]["NODE_PATH"] = f"{PACKAGES_INSIDE}/{NODE_MODULES}"
        else:
            config["python_path"] = [f"{PACKAGES_INSIDE}/{SITE_PACKAGES}"]
            # For interpreters started inside (a session's `python3 script.py`): the zygote's
            # own forks have the packages on sys.path already.
            config["environ"]["PYTHONPATH"] = f"{PACKAGES_INSIDE}/{SITE_PACKAGES}"
    return Mount(str(environment.get("key", "")), launcher, config)
