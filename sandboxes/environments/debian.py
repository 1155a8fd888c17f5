"""A second Python, and Debian's packages: a minimal Debian root filesystem built with
``mmdebstrap`` in a user namespace.

Why this way (README, "Environments"): the sandbox already binds a read-only view of a root
filesystem (``/usr``, ``/lib*``, ``/etc``) into each zygote; a Debian root holding another
Python is exactly such a view, built from Debian's signed packages by Debian's own tool,
needing nothing at run time (the build is the only step that reaches the network), and the same
files a ``debian:trixie-slim`` image holds on Kubernetes. ``--variant=minbase`` keeps it to
essential packages plus the interpreter (about 260 MB, tens of seconds here). A terminal task's
environment adds Debian packages of its own (nginx, cron, sqlite3...): they are installed in the
same build, so a root is named by its suite and its whole package list.

Nothing of a package runs on the host: ``mmdebstrap --mode=root`` runs as root of a user
namespace whose ids are unprivileged host ids (:mod:`sandboxes.environments.userns`), so the
packages' maintainer scripts run chrooted in the new root as a host user that owns nothing on
the host. Packages come only from the archive apt verifies against Debian's signing keys
(mmdebstrap refuses unsigned ones). The root comes back as a tar on a pipe, unpacked here with
its owners as inside (root's files belong to root), as a root built by root would have them,
and checked member by member (:func:`_unpack`).

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
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from sandboxes.environments.steps import tail
from sandboxes.environments.store import EnvironmentBuildError
from sandboxes.environments.userns import NamespaceUnavailable, run_as_namespace_root

# runtime -> (Debian suite, packages beyond minbase, the interpreter's path inside the root).
# ``python3`` (trixie's default Python is 3.13) so that a session's shell finds ``python3``;
# procps and curl: the tools an agent's shell (and the session corpus) reaches for.
ROOTS = {
    "python3.13": ("trixie", ("python3", "procps", "curl"), "/usr/bin/python3.13"),
}
BUILD_TIMEOUT_S = 900.0
MAX_DEBIAN_PACKAGES = 64
# A Debian package name (Debian Policy 5.6.1), optionally ``=VERSION`` (apt's own syntax).
DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$")
LOADER = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
# Removed after the build: package caches and documentation nothing in a sandbox reads.
PRUNE = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man")


def mirror() -> str:
    """``CRUCIBLE_DEBIAN_MIRROR``, default Debian's own."""
    from core.env import env_str  # noqa: PLC0415 (this module runs without Django)

    return env_str("CRUCIBLE_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def check_packages(packages: list[str] | tuple[str, ...]) -> list[str]:
    """The Debian package list as a root is built from it: names checked, repeats refused,
    sorted (the order of ``--include`` changes nothing).

    Raises:
        ValueError: a name that is not a Debian package name (``NAME`` or ``NAME=VERSION``),
            a repeat, or more than :data:`MAX_DEBIAN_PACKAGES`; the message names it.
    """
    if len(packages) > MAX_DEBIAN_PACKAGES:
        raise ValueError(
            f"{len(packages)} Debian packages; an environment installs at most "
            f"{MAX_DEBIAN_PACKAGES}"
        )
    seen: set[str] = set()
    for name in packages:
        if not isinstance(name, str) or not DEBIAN_PACKAGE.match(name):
            raise ValueError(
                f"Debian package {name!r} is not a package name: write NAME or NAME=VERSION "
                "(lower-case letters, digits, + - .)"
            )
        bare = name.split("=", 1)[0]
        if bare in seen:
            raise ValueError(f"Debian package {bare!r} is listed twice; keep one")
        seen.add(bare)
    return sorted(packages)


def root_spec(runtime: str, debian_packages: list[str] | tuple[str, ...] = ()) -> dict | None:
    """What the root of ``runtime`` is built from (with ``debian_packages`` installed besides
    its own), or None when the host provides it."""
    if runtime not in ROOTS:
        return None
    suite, packages, interpreter = ROOTS[runtime]
    spec = {"runtime": runtime, "suite": suite, "packages": list(packages), "python": interpreter}
    if debian_packages:  # only when given: a bare root keeps its hash
        spec["debian_packages"] = check_packages(debian_packages)
    return spec


def build_root(
    runtime: str,
    tree: Path,
    *,
    debian_packages: list[str] | tuple[str, ...] = (),
    timeout_s: float = BUILD_TIMEOUT_S,
) -> dict:
    """``mmdebstrap --variant=minbase --include=PACKAGES SUITE tree MIRROR`` as root of a user
    namespace (see the module), then the tree's owners mapped back and the caches pruned.

    Returns:
        ``{"resolved": [{"name", "version"}...] (dpkg's installed packages), "log"}``.

    Raises:
        EnvironmentBuildError: mmdebstrap is missing or this host cannot make the namespace
            (``runtime_unavailable``); a package is unknown, or the build failed, ran out of
            disk or time.
    """
    spec = root_spec(runtime, debian_packages)
    if spec is None:
        raise EnvironmentBuildError(f"no root filesystem is defined for runtime {runtime}")
    mmdebstrap = shutil.which("mmdebstrap") or (
        "/usr/bin/mmdebstrap" if os.path.exists("/usr/bin/mmdebstrap") else None
    )
    if mmdebstrap is None:
        raise EnvironmentBuildError(
            f"runtime {runtime} is built with mmdebstrap, which is not installed here "
            "(apt-get install mmdebstrap)",
            kind="runtime_unavailable",
        )
    packages = [*spec["packages"], *spec.get("debian_packages", [])]
    # A tar on standard output: the namespace's root needs no way into the store (which may
    # lie under a directory only the host's root may enter); this process unpacks it.
    command = [
        mmdebstrap,
        "--mode=root",
        "--variant=minbase",
        "--format=tar",
        # a mirror's passing hiccup (a reset connection, a 503) costs a retry, not the build
        '--aptopt=Acquire::Retries "3"',
        f"--include={','.join(packages)}",
        spec["suite"],
        "-",
        mirror(),
    ]
    what = f"the Debian root of {runtime}" + (
        f" with {', '.join(spec['debian_packages'])}" if debian_packages else ""
    )
    unreadable: list[ArchiveUnreadable] = []

    def unpack(stream) -> None:
        try:
            _unpack(stream, tree)
        except ArchiveUnreadable as exc:  # cut short: mmdebstrap's exit and output say why
            unreadable.append(exc)

    try:
        done = run_as_namespace_root(command, timeout_s=timeout_s, read_stdout=unpack)
    except NamespaceUnavailable as exc:
        raise EnvironmentBuildError(
            f"{what} is built as root of a user namespace, which this host cannot make "
            f"({exc}); build it once as root (python manage.py build_environment), or run the "
            "sandbox image for it",
            kind="runtime_unavailable",
        ) from None
    except subprocess.TimeoutExpired as exc:
        raise EnvironmentBuildError(
            f"{what} took more than {timeout_s:.0f} s and was stopped",
            kind="timeout",
            log=tail(f"{exc.output or ''}{exc.stderr or ''}"),
        ) from None
    log = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}"
    if done.returncode != 0:
        raise _failure(what, done.stdout + done.stderr, log)
    if unreadable:
        raise EnvironmentBuildError(str(unreadable[0]), log=tail(log))
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
    return {"resolved": sorted(resolved, key=lambda r: r["name"]), "log": tail(log)}


class ArchiveUnreadable(EnvironmentBuildError):
    """The build's tar stream ended early or was not a tar."""


UNKNOWN_PACKAGE = re.compile(r"E: Unable to locate package (\S+)")
NO_CANDIDATE = re.compile(r"E: (?:Version '[^']*' for '|Package ')(\S+?)'? ")


def _failure(what: str, output: str, log: str) -> EnvironmentBuildError:
    """The build error a failed mmdebstrap means: the package apt could not find, a full disk,
    or the rest of its output."""
    for pattern in (UNKNOWN_PACKAGE, NO_CANDIDATE):
        found = pattern.search(output)
        if found:
            return EnvironmentBuildError(
                f"{what}: Debian has no package {found.group(1)!r} in this suite (or not at that "
                "version); check its name on packages.debian.org",
                kind="not_found",
                log=tail(log),
            )
    if "No space left on device" in output:
        return EnvironmentBuildError(
            f"{what}: the disk is full; free space under the store",
            kind="out_of_disk",
            log=tail(log),
        )
    last = [line for line in output.strip().splitlines() if line.strip()][-3:]
    return EnvironmentBuildError(f"{what} failed: {' / '.join(last)}", log=tail(log))


def _unpack(stream, tree: Path) -> None:
    """Unpack the build's tar stream into ``tree`` as the namespace wrote it: owners by number
    (the namespace's root is root), no member outside ``tree`` or through a link, no set-id,
    sticky or group/other write bit (tarfile's ``tar`` filter), and no device or FIFO (the
    sandbox binds its own five devices).

    Raises:
        EnvironmentBuildError: a member the filter refuses (named).
        ArchiveUnreadable: the stream is not a whole tar (mmdebstrap failed part way or at once:
            its exit status and output, read after, name the cause).
    """

    def member_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        if member.isdev() or member.isfifo():
            return None
        return tarfile.tar_filter(member, path)

    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            archive.extractall(tree, numeric_owner=True, filter=member_filter)
    except tarfile.FilterError as exc:
        raise EnvironmentBuildError(f"the Debian root's archive was refused: {exc}") from None
    except tarfile.TarError as exc:
        raise ArchiveUnreadable(f"the Debian root's archive could not be read: {exc}") from None


def launcher(root: Path, runtime: str) -> list[str]:
    """The argv prefix that starts ``runtime``'s interpreter from ``root`` on the host: the
    root's dynamic loader with the root's libraries (the host's glibc may be older)."""
    _suite, _packages, interpreter = ROOTS[runtime]
    library_path = ":".join(str(root / d) for d in LIBRARY_DIRS)
    return [str(root / LOADER), "--library-path", library_path, str(root) + interpreter]
