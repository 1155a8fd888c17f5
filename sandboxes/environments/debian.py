"""A second Python: a minimal Debian root filesystem built with ``debootstrap``.

Why this way (README, "Environments"): the sandbox already binds a read-only view of a root
filesystem (``/usr``, ``/lib*``, ``/etc``) into each zygote; a Debian root holding another
Python is exactly such a view, built from Debian's signed packages by Debian's own tool,
needing nothing at run time (the build is the only step that reaches the network), and the same
files a ``debian:trixie-slim`` image holds on Kubernetes. A Python built from source would take
minutes and a compiler; pyenv's copies live under a private home and link against the host's
libraries. ``--variant=minbase`` keeps it to essential packages plus the interpreter (about
260 MB, tens of seconds here).

The interpreter of a root starts with the root's own dynamic loader and libraries
(:func:`launcher`), before the zygote pivots into the root; from then on everything it loads
comes from the root.

Reproducibility: the archive changes as Debian publishes updates, so two builds on different
days may differ; the store names a root by its spec (suite and packages) and the manifest
records the bytes of the one that was built, which every worker verifies on mount. Pin a
snapshot (``CRUCIBLE_DEBIAN_MIRROR=http://snapshot.debian.org/archive/debian/<time>/``) for
byte-identical rebuilds elsewhere.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sandboxes.environments.steps import run_step
from sandboxes.environments.store import EnvironmentBuildError

# runtime -> (Debian suite, packages beyond minbase, the interpreter's path inside the root).
# ``python3`` (trixie's default Python is 3.13) so that a session's shell finds ``python3``;
# procps and curl: the tools an agent's shell (and the session corpus) reaches for.
ROOTS = {
    "python3.13": ("trixie", ("python3", "procps", "curl"), "/usr/bin/python3.13"),
}
DEBOOTSTRAP_TIMEOUT_S = 900.0
LOADER = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
# Removed after the build: package caches and documentation nothing in a sandbox reads.
PRUNE = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man")


def mirror() -> str:
    """``CRUCIBLE_DEBIAN_MIRROR``, default Debian's own."""
    from core.env import env_str  # noqa: PLC0415 (this module runs without Django)

    return env_str("CRUCIBLE_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def root_spec(runtime: str) -> dict | None:
    """What the root of ``runtime`` is built from, or None when the host provides it."""
    if runtime not in ROOTS:
        return None
    suite, packages, interpreter = ROOTS[runtime]
    return {"runtime": runtime, "suite": suite, "packages": list(packages), "python": interpreter}


def build_root(runtime: str, tree: Path, *, timeout_s: float = DEBOOTSTRAP_TIMEOUT_S) -> dict:
    """``debootstrap --variant=minbase --include=PACKAGES SUITE tree MIRROR``, then prune.

    Returns:
        ``{"resolved": [{"name", "version"}...] (dpkg's installed packages), "log"}``.

    Raises:
        EnvironmentBuildError: debootstrap is missing (``runtime_unavailable``), failed, ran out
            of disk or time.
    """
    spec = root_spec(runtime)
    if spec is None:
        raise EnvironmentBuildError(f"no root filesystem is defined for runtime {runtime}")
    if os.geteuid() != 0:
        raise EnvironmentBuildError(
            f"runtime {runtime} needs a Debian root filesystem, and debootstrap must run as "
            "root; build it once as root (python manage.py build_environment), or run the "
            "sandbox image for it",
            kind="runtime_unavailable",
        )
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None
    )
    if debootstrap is None:
        raise EnvironmentBuildError(
            f"runtime {runtime} is built with debootstrap, which is not installed here "
            "(apt-get install debootstrap)",
            kind="runtime_unavailable",
        )
    command = [
        debootstrap,
        "--variant=minbase",
        f"--include={','.join(spec['packages'])}",
        spec["suite"],
        str(tree),
        mirror(),
    ]
    log = run_step(command, timeout_s=timeout_s, what=f"debootstrap of {runtime}")
    for rel in PRUNE:
        target = tree / rel
        if target.is_dir():
            shutil.rmtree(target)
            target.mkdir()
    dev = tree / "dev"
    if dev.is_dir():  # the sandbox binds its own five device nodes
        shutil.rmtree(dev)
        dev.mkdir()
    status = (tree / "var/lib/dpkg/status").read_text(errors="replace")
    resolved = []
    for block in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "Package" in fields and "installed" in fields.get("Status", ""):
            resolved.append({"name": fields["Package"], "version": fields.get("Version", "")})
    return {"resolved": sorted(resolved, key=lambda r: r["name"]), "log": log[-20000:]}


def launcher(root: Path, runtime: str) -> list[str]:
    """The argv prefix that starts ``runtime``'s interpreter from ``root`` on the host: the
    root's dynamic loader with the root's libraries (the host's glibc may be older)."""
    _suite, _packages, interpreter = ROOTS[runtime]
    library_path = ":".join(str(root / d) for d in LIBRARY_DIRS)
    return [str(root / LOADER), "--library-path", library_path, str(root) + interpreter]
