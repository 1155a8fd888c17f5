"""Which interpreter a sandbox runtime executes, found where: the host's Python (or the system's
one of the same version when the sandbox user cannot reach it) and the machine's Node.js.

A leaf of the sandbox package: the graders (:mod:`sandboxes.grading`, :mod:`sandboxes.javascript`),
the environment builder and the executors (:mod:`sandboxes.runtimes`) all take their interpreter
from here, so the executors, which import the graders, are imported by none of them.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
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
    for candidate in (
        own,
        Path(f"/usr/bin/python{version}"),
        Path(f"/usr/local/bin/python{version}"),
    ):
        if _world_executable(candidate):
            return str(candidate)
    raise RuntimeUnavailable(
        f"no Python {version} interpreter readable by the sandbox user; "
        f"install python{version} system-wide (apt-get install python{version})"
    )


@functools.lru_cache(maxsize=1)
def node_interpreter() -> str:
    """The machine's Node.js, which sandboxes run for JavaScript.

    Raises:
        RuntimeUnavailable: no ``node`` the sandbox user can execute.
    """
    found = shutil.which("node") or shutil.which("nodejs")
    if found and _world_executable(Path(os.path.realpath(found))):
        return os.path.realpath(found)
    raise RuntimeUnavailable(
        "no Node.js found for the node runtime; install it (apt-get install nodejs)"
    )


def node_major_version() -> int:
    """The major version of the machine's Node.js (``node --version`` -> ``v20.20.2`` -> 20).

    Raises:
        RuntimeUnavailable: Node.js is missing or does not answer.
    """
    try:
        out = subprocess.run(
            [node_interpreter(), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise RuntimeUnavailable(f"cannot read the Node.js version: {exc}") from exc
