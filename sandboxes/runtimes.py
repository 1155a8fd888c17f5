"""Runtimes a sandbox can execute: which interpreter, found where.

A runtime is a plug-in: adding one (a second Python, Node.js) means adding a
function here that returns its argv prefix.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path


class RuntimeUnavailable(RuntimeError):
    """No interpreter for the runtime can be executed by the sandbox user."""


def _world_executable(path: Path) -> bool:
    """True when a user with no special rights can reach and run ``path``."""
    try:
        if not path.stat().st_mode & stat.S_IXOTH:
            return False
        for parent in path.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def python_interpreter() -> str:
    """The Python interpreter sandboxes run: the project's, same major.minor version.

    When the host runs as root the sandbox drops to ``nobody``, which cannot reach
    an interpreter under a private home (pyenv in ``/root``); the system's
    interpreter of the same version serves then.

    Raises:
        RuntimeUnavailable: no interpreter of this version is runnable by the sandbox.
    """
    own = Path(os.path.realpath(sys.executable))
    if os.geteuid() != 0:
        return str(own)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (own, Path(f"/usr/bin/python{version}"), Path(f"/usr/local/bin/python{version}")):
        if _world_executable(candidate):
            return str(candidate)
    raise RuntimeUnavailable(
        f"no Python {version} interpreter readable by the sandbox user; "
        f"install python{version} system-wide (apt-get install python{version})"
    )
