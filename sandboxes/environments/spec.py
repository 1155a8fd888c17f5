"""What an environment is made of, checked, and the hashes that name its builds.

An environment version (``tasks_library.models.EnvironmentVersion``) is a runtime and a list of
pinned packages. Two layers come out of it, each a directory of the store
(:mod:`sandboxes.environments.store`) named by the hash of what determines its bytes:

* the runtime's **root**, for a runtime that is not the host's own interpreter: a Debian root
  filesystem holding that Python (:mod:`sandboxes.environments.debian`); none for the host's
  Python or Node.js, whose sandboxes bind the host's read-only system directories;
* the **packages**: ``pip install --target`` for Python (``site-packages``, put on the
  sandbox's ``sys.path``), or ``npm ci`` for Node.js (``node_modules``, on ``NODE_PATH``);
  none when the list is empty.

The name and image of an environment version do not change a byte of either, so two versions
that differ only there share their builds.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sandboxes.environments.debian import check_packages, root_spec

# Bumped when a layer's builder changes what it writes or records: that layer's build hashes
# change with it (packages 2: the build record keeps each file's sha256 from pip's report;
# 3: pip's REQUESTED markers are dropped; root 2, packages 4: files keep their modes less the
# write and set-id bits, where they were all made world-readable before; packages 5: the host
# runtime's layer carries checked-hash .pyc files; 6: so does a Debian root runtime's;
# root 3: built by mmdebstrap as root of a user namespace, no longer by debootstrap as root).
BUILD_FORMAT = {"root": 3, "packages": 6}
HOST_PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"
PYTHON_RUNTIME = re.compile(r"^python3\.(\d+)$")
NODE_RUNTIME = re.compile(r"^node(\d+)$")
HASH_OPTION = re.compile(r"--hash[= ](sha256:[0-9a-f]{64})")
NPM_PIN = re.compile(r"^(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*@\d+\.\d+\.\d+([-+][\w.-]+)?$")


class EnvironmentSpecError(ValueError):
    """A runtime or package list that cannot be built as written.

    Attributes:
        field: ``runtime`` or ``packages``; ``package``: the requirement at fault.
    """

    def __init__(self, message: str, *, field: str, package: str = "") -> None:
        super().__init__(message)
        self.field, self.package = field, package


@dataclass(frozen=True)
class PythonPin:
    """One Python requirement, pinned: ``name==version`` with optional extras, marker and
    ``--hash=sha256:...`` options."""

    name: str
    version: str
    line: str  # the canonical requirement, without hashes
    hashes: tuple[str, ...] = ()

    def requirement_line(self) -> str:
        """The line for a requirements file (with its hashes, for ``--require-hashes``)."""
        return " ".join([self.line, *(f"--hash={h}" for h in self.hashes)])


@dataclass(frozen=True)
class EnvironmentSpec:
    """A runtime and its pinned packages, checked (see :func:`parse`)."""

    runtime: str
    python_pins: tuple[PythonPin, ...] = ()
    npm_pins: tuple[str, ...] = ()
    # Python packages may be built from sdists (in a sandbox: source_build.py); else wheels only.
    source_builds: bool = False
    # Debian packages installed into the runtime's root (a Debian root runtime's only), sorted.
    debian_packages: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list, compare=False)

    @property
    def family(self) -> str:
        return "node" if NODE_RUNTIME.match(self.runtime) else "python"

    @property
    def packages(self) -> list[str]:
        """The canonical package list (what is hashed)."""
        if self.family == "node":
            return list(self.npm_pins)
        return [p.requirement_line() for p in self.python_pins]

    @property
    def require_hashes(self) -> bool:
        return any(p.hashes for p in self.python_pins)

    def root_hash(self) -> str | None:
        """The build hash of the runtime's root filesystem, or None (the host's)."""
        spec = root_spec(self.runtime, self.debian_packages)
        return _digest({"layer": "root", **spec}) if spec else None

    def packages_hash(self) -> str | None:
        """The build hash of the packages layer, or None (no packages)."""
        if not self.packages:
            return None
        content = {
            "layer": "packages",
            "runtime": self.runtime,
            "root": self.root_hash(),
            "packages": self.packages,
        }
        if self.source_builds:  # only when set: wheel-only layers keep their hashes
            content["source_builds"] = True
        return _digest(content)


def _digest(content: dict) -> str:
    text = json.dumps(
        dict(content, format=BUILD_FORMAT[content["layer"]]), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _python_pin(raw: str) -> PythonPin:
    hashes = tuple(HASH_OPTION.findall(raw))
    text = HASH_OPTION.sub("", raw).strip()
    if "--hash" in text:
        raise EnvironmentSpecError(
            f"package {raw!r}: a hash must be written --hash=sha256:<64 hex digits>",
            field="packages",
            package=raw,
        )
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise EnvironmentSpecError(
            f"package {raw!r} is not a requirement pip can read ({exc}); write NAME==VERSION",
            field="packages",
            package=raw,
        ) from None
    specs = list(requirement.specifier)
    if (
        requirement.url
        or len(specs) != 1
        or specs[0].operator not in ("==", "===")
        or (specs[0].version.endswith(".*"))
    ):
        raise EnvironmentSpecError(
            f"package {raw!r} is not pinned: write an exact version, e.g. "
            f"{requirement.name}==1.2.3 (every build must install the same files)",
            field="packages",
            package=raw,
        )
    name = canonicalize_name(requirement.name)
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    marker = f"; {requirement.marker}" if requirement.marker else ""
    line = f"{name}{extras}=={specs[0].version}{marker}"
    return PythonPin(name, specs[0].version, line, hashes)


def parse(
    runtime: str,
    packages: list[str],
    *,
    source_builds: bool = False,
    debian_packages: list[str] | tuple[str, ...] = (),
) -> EnvironmentSpec:
    """Check a runtime and its package list.

    Args:
        runtime: ``python3.N`` or ``nodeN``.
        packages: for Python, pip requirements pinned exactly (``numpy==2.2.6``, optionally
            ``--hash=sha256:...``; with one hash given, every package needs its hashes, as
            pip's ``--require-hashes`` does); for Node.js, ``name@X.Y.Z``.
        source_builds: Python packages without a wheel may be built from their sdists (in a
            sandbox); False: wheels only. For the host's Python only.
        debian_packages: Debian package names (``NAME`` or ``NAME=VERSION``) installed into the
            runtime's Debian root; for a runtime with a root (``python3.13``) only.

    Raises:
        EnvironmentSpecError: an unknown runtime, an unpinned, unreadable or repeated package
            (the message names it and says what to write), or ``source_builds`` for a runtime
            that cannot build in a sandbox (field ``source_builds``); a bad Debian package
            name, or Debian packages for a runtime without a Debian root (``debian_packages``).
    """
    debian = _debian_packages(runtime, debian_packages)
    if not isinstance(source_builds, bool):
        raise EnvironmentSpecError("source_builds must be true or false", field="source_builds")
    if source_builds and runtime != HOST_PYTHON:
        raise EnvironmentSpecError(
            f"source builds run in a sandbox of the host's Python ({HOST_PYTHON}); a {runtime} "
            "environment installs wheels only: pin releases that publish a wheel for it",
            field="source_builds",
        )
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise EnvironmentSpecError(
            "packages must be a list of pinned requirement strings", field="packages"
        )
    packages = [p.strip() for p in packages if p.strip()]
    if NODE_RUNTIME.match(runtime or ""):
        for raw in packages:
            if not NPM_PIN.match(raw):
                raise EnvironmentSpecError(
                    f"package {raw!r} is not pinned: a Node.js package is written "
                    "name@X.Y.Z (an exact version)",
                    field="packages",
                    package=raw,
                )
        _no_repeats([p.rsplit("@", 1)[0] for p in packages], packages)
        return EnvironmentSpec(runtime, npm_pins=tuple(sorted(packages)), debian_packages=debian)
    if not PYTHON_RUNTIME.match(runtime or ""):
        raise EnvironmentSpecError(
            f"unknown runtime {runtime!r}: write python3.N or nodeN", field="runtime"
        )
    pins = [_python_pin(raw) for raw in packages]
    _no_repeats([p.name for p in pins], packages)
    if any(p.hashes for p in pins) and not all(p.hashes for p in pins):
        bare = next(p for p in pins if not p.hashes)
        raise EnvironmentSpecError(
            f"package {bare.line!r} has no --hash while others have: with hashes, pip checks "
            "every package (--require-hashes); give this one its sha256 too",
            field="packages",
            package=bare.line,
        )
    return EnvironmentSpec(
        runtime,
        python_pins=tuple(sorted(pins, key=lambda p: p.name)),
        source_builds=source_builds,
        debian_packages=debian,
    )


def _debian_packages(runtime: str, packages) -> tuple[str, ...]:
    """``packages`` checked (:func:`sandboxes.environments.debian.check_packages`), for a
    runtime built on a Debian root."""
    if isinstance(packages, str) or not all(isinstance(p, str) for p in packages or ()):
        raise EnvironmentSpecError(
            "debian_packages must be a list of Debian package names", field="debian_packages"
        )
    packages = [p.strip() for p in packages or () if p.strip()]
    if not packages:
        return ()
    if root_spec(runtime) is None:
        raise EnvironmentSpecError(
            f"Debian packages ({', '.join(packages)}) are installed into a Debian root, and "
            f"runtime {runtime!r} runs on the host's system; choose python3.13 (a Debian trixie "
            "root)",
            field="debian_packages",
        )
    try:
        return tuple(check_packages(packages))
    except ValueError as exc:
        raise EnvironmentSpecError(str(exc), field="debian_packages") from None


def _no_repeats(names: list[str], raw: list[str]) -> None:
    seen: set[str] = set()
    for name, line in zip(names, raw):
        if name in seen:
            raise EnvironmentSpecError(
                f"package {name!r} is listed twice; keep one pin", field="packages", package=line
            )
        seen.add(name)
