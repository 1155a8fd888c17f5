"""The caller's side of an environment: check its runtime, build its layers, name its queue."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from sandboxes.environments import debian
from sandboxes.environments.mount import store
from sandboxes.environments.packages import build_node, build_python
from sandboxes.environments.spec import HOST_PYTHON, EnvironmentSpec, EnvironmentSpecError
from sandboxes.environments.store import Built, EnvironmentStore


def available_runtimes() -> list[str]:
    """The Python runtimes this machine can provide: the host's and each Debian root's."""
    return [HOST_PYTHON, *sorted(debian.ROOTS)]


def check_runtime(spec: EnvironmentSpec) -> None:
    """Raises EnvironmentSpecError when no sandbox here can provide ``spec.runtime``."""
    if spec.family == "node":
        return  # the machine's Node.js (sandboxes.interpreters.node_interpreter)
    if spec.runtime not in available_runtimes():
        raise EnvironmentSpecError(
            f"runtime {spec.runtime} cannot be provided here; available: "
            f"{HOST_PYTHON} (the host's), "
            + ", ".join(f"{r} (Debian {debian.ROOTS[r][0]} root)" for r in sorted(debian.ROOTS)),
            field="runtime",
        )


def environment_queue(runtime: str, family: str, key: str, *, has_layers: bool) -> str:
    """The queue of one built environment: its runtime's (:func:`queue_runtime`), or with
    ``CRUCIBLE_SANDBOX_QUEUE_PER_ENVIRONMENT`` (Kubernetes, where each environment version is an
    image of its own: ``manage.py environment_image``) ``<runtime>@<key[:16]>`` for one with
    packages, which only that image's pods consume."""
    from django.conf import settings  # noqa: PLC0415 (settings only where a request is made)

    queue = queue_runtime(runtime, family)
    if has_layers and getattr(settings, "SANDBOX_QUEUE_PER_ENVIRONMENT", False):
        return f"{queue}@{key[:16]}"
    return queue


def queue_runtime(runtime: str, family: str) -> str:
    """The sandbox queue (``sandbox_worker --runtime``) that serves an environment's runtime:
    ``python`` for the host's Python, ``node`` for Node.js, the runtime's own name for a
    runtime with a root of its own (``python3.13``)."""
    if family == "node":
        return "node"
    return "python" if runtime in ("", HOST_PYTHON) else runtime


@dataclass(frozen=True)
class Materialised:
    """An environment's built layers (None where it has none)."""

    spec: EnvironmentSpec
    root: Built | None
    packages: Built | None

    @property
    def key(self) -> str:
        """The environment's build identity: its packages hash, else its root's, else
        ``host-<runtime>`` (what a grading records it ran in)."""
        if self.packages:
            return self.packages.hash
        if self.root:
            return self.root.hash
        return f"host-{self.spec.runtime}"

    @property
    def cache_hit(self) -> bool:
        return all(b.cache_hit for b in (self.root, self.packages) if b is not None)

    def request_field(self) -> dict:
        """What a queued request carries (``payload["environment"]``)."""
        return {
            "key": self.key,
            "queue": environment_queue(
                self.spec.runtime, self.spec.family, self.key, has_layers=self.packages is not None
            ),
            "runtime": self.spec.runtime,
            "root": self.root.hash if self.root else None,
            "packages": self.packages.hash if self.packages else None,
        }


def materialise(
    spec: EnvironmentSpec,
    *,
    progress: Callable[[str], None] | None = None,
    environment_store: EnvironmentStore | None = None,
    lock: list[dict] | None = None,
) -> Materialised:
    """Build (or find) the root and the packages of ``spec`` (Python packages exactly as
    ``lock`` lists them when given: see :func:`~sandboxes.environments.packages.build_python`).

    Raises:
        EnvironmentSpecError: the runtime cannot be provided here.
        EnvironmentBuildError: a build failed (nothing half-built is published).
    """
    check_runtime(spec)
    target = environment_store or store()
    say = progress or (lambda _line: None)
    root = None
    root_hash = spec.root_hash()
    if root_hash:
        extra = f" with {', '.join(spec.debian_packages)}" if spec.debian_packages else ""
        say(f"root filesystem of {spec.runtime}{extra} ({root_hash[:12]})")
        root = target.ensure(
            root_hash,
            debian.root_spec(spec.runtime, spec.debian_packages),
            lambda tree: debian.build_root(
                spec.runtime, tree, debian_packages=spec.debian_packages
            ),
            progress=say,
        )
    packages = None
    packages_hash = spec.packages_hash()
    if packages_hash:
        say(f"packages {', '.join(spec.packages)} ({packages_hash[:12]})")
        if spec.family == "node":
            builder = build_node
        else:  # a root's interpreter compiles its layer's bytecode
            builder = functools.partial(build_python, root=root.tree if root else None)
        packages = target.ensure(
            packages_hash,
            {"runtime": spec.runtime, "packages": spec.packages},
            lambda tree: builder(spec, tree, lock=lock) if lock else builder(spec, tree),
            progress=say,
        )
    return Materialised(spec, root, packages)
