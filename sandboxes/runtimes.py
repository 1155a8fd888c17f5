"""Runtimes a sandbox can execute: which interpreter, found where.

A runtime is a plug-in: adding one (a second Python, Node.js) means adding its
interpreter lookup and an executor class here, and naming it in ``EXECUTORS``;
``sandbox_worker --runtime NAME`` then serves it.
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


class PythonExecutor:
    """Runs ``python_tests`` requests in a warm :class:`~sandboxes.grading.PythonGrader`."""

    kinds = ("python_tests",)

    def __init__(self) -> None:
        self.grader = self.make_grader()
        self.grader.boot_ahead = False  # the worker calls prewarm() once it has answered
        self.grader.prewarm()

    @staticmethod
    def make_grader():
        """This runtime's resident grader (a :class:`~sandboxes.pairs.WarmGrader`), not yet
        booted."""
        from sandboxes.grading import PythonGrader  # noqa: PLC0415 (grading imports this module)

        return PythonGrader()

    def prewarm(self) -> None:
        """Boot the sandboxes of the next request now (call it between requests).

        Raises:
            ZygoteDied: a resident sandbox could not start.
        """
        self.grader.prewarm()

    def run(self, request: dict):
        """Execute one queued request (its sandboxes are booted here if :meth:`prewarm` was not
        called).

        Raises:
            ZygoteDied: the sandbox died (the worker requeues the request).
            ValueError: the request's kind is not one this runtime runs.
        """
        # The grader's modules, this one with them, run on the standard library alone
        # (tests/sandboxes/test_not_root.py grades with the system's Python).
        from sandboxes.queue import request_limits  # noqa: PLC0415 (it needs redis and Django)

        if request.get("kind") not in self.kinds:
            raise ValueError(
                f"this runtime runs {', '.join(self.kinds)}, not {request.get('kind')!r}"
            )
        payload = request["payload"]
        extra = (
            {"files": payload["files"], "verifier": payload["verifier"]}
            if "verifier" in payload
            else {}
        )
        if payload.get("setup"):
            extra["setup"] = payload["setup"]
        return self.grader.grade(
            payload["program"],
            payload["tests"],
            payload["entry_point"],
            prompt=payload.get("prompt", ""),
            limits=request_limits(request),
            **extra,
        )

    def close(self) -> None:
        self.grader.close()


class NodeExecutor(PythonExecutor):
    """Runs ``javascript_tests`` requests in a pre-warmed
    :class:`~sandboxes.javascript.NodeGrader`."""

    kinds = ("javascript_tests",)

    @staticmethod
    def make_grader():
        from sandboxes.javascript import NodeGrader  # noqa: PLC0415 (it imports this module)

        return NodeGrader()


EXECUTORS = {"python": PythonExecutor, "node": NodeExecutor}


def executor_for(runtime: str):
    """A fresh, started executor for ``runtime``.

    Raises:
        ValueError: no such runtime (the message lists the known ones).
        RuntimeUnavailable: the runtime's interpreter is missing here.
    """
    try:
        return EXECUTORS[runtime]()
    except KeyError:
        raise ValueError(
            f"unknown sandbox runtime {runtime!r}; known: {', '.join(sorted(EXECUTORS))}"
        ) from None
