"""A real project's source distribution: fetched with pip by exact version, unpacked safely,
its licence and layout read.

The archive is read into memory (``{path: bytes}``), never extracted onto the disk: a member
that is a link, a device, an absolute path or a path with ``..`` is refused, and the archive's
size, member count and every member's size are capped, so a hostile sdist (a tar bomb, a link
to ``/etc``) cannot write or read outside the workspace it becomes.

What this does not contain: ``pip download`` of an sdist prepares its metadata by running the
project's build backend (``setup.py``) on this host, in pip's build isolation, as ``pip
install`` would. Generate only from projects you would install; everything the generator itself
runs of the project (its tests, its modules) runs in the sandbox.
"""

from __future__ import annotations

import email.parser
import fnmatch
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from console.core.errors import InputError

MAX_TOTAL_BYTES = 64 * 1024 * 1024  # unpacked, all members together
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_MEMBERS = 5000
PIP_TIMEOUT_S = 300
# pytest's default ``python_files`` (a project's own ini may say otherwise; these five don't).
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")
# Directories whose Python files are neither the package nor its tests.
NOT_SOURCE_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools"}
LICENCE_FILES = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE)([.-].*)?$", re.IGNORECASE)


class SdistError(InputError):
    """A package that cannot be fetched or used: unknown, no sdist, unsafe, or without tests."""


@dataclass(frozen=True)
class Project:
    """One project's source distribution, unpacked.

    Attributes:
        name: the distribution's canonical name (``more-itertools``); version: exact (``10.5.0``).
        files: every regular file of the sdist below its top directory, ``{path: bytes}``
            (``*.egg-info/`` left out: build output, not the project).
        licence: what its metadata says (``License-Expression``, the ``License`` field when
            short, else the ``License ::`` classifier), or ``""`` when it says nothing.
        licence_files: the paths of its licence texts (``LICENSE``, ``COPYING``...).
        test_files: the test modules pytest collects by default (``test_*.py``, ``*_test.py``).
        source_files: the package's own modules: ``.py`` files that are neither tests,
            ``conftest.py``, ``setup.py`` nor under docs or examples.
        pythonpath: where its packages are imported from: ``src`` for a src layout, else ``.``.
        archive: the sdist's file name.
    """

    name: str
    version: str
    files: dict[str, bytes]
    licence: str
    licence_files: tuple[str, ...]
    test_files: tuple[str, ...]
    source_files: tuple[str, ...]
    pythonpath: str
    archive: str
    notes: list[str] = field(default_factory=list)


def parse_pin(pin: str) -> tuple[str, str]:
    """``NAME==VERSION`` -> ``(canonical name, version)``.

    Raises:
        SdistError: anything but a name and one exact ``==`` version (field ``package``).
    """
    try:
        requirement = Requirement(pin.strip())
    except InvalidRequirement as exc:
        raise SdistError(
            f"package {pin!r}: not a requirement ({exc}); write NAME==VERSION, e.g. "
            "inflection==0.5.1",
            field="package",
        ) from None
    specifiers = list(requirement.specifier)
    if (
        requirement.extras
        or requirement.marker
        or requirement.url
        or len(specifiers) != 1
        or specifiers[0].operator != "=="
        or "*" in specifiers[0].version
    ):
        raise SdistError(
            f"package {pin!r}: give one exact version, NAME==VERSION (e.g. inflection==0.5.1), "
            "without extras or markers",
            field="package",
        )
    try:
        Version(specifiers[0].version)
    except InvalidVersion:
        raise SdistError(f"package {pin!r}: {specifiers[0].version!r} is not a version") from None
    return canonicalize_name(requirement.name), specifiers[0].version


def _cached(cache_dir: Path, name: str, version: str) -> Path | None:
    if not cache_dir.is_dir():
        return None
    for path in sorted(cache_dir.iterdir()):
        try:
            found_name, found_version = parse_sdist_filename(path.name)
        except InvalidSdistFilename:
            continue
        if found_name == name and found_version == Version(version):
            return path
    return None


def fetch(pin: str, *, cache_dir: Path | None = None) -> Path:
    """The sdist of ``pin`` (``NAME==VERSION``), from ``cache_dir`` or else fetched there with
    ``pip download --no-deps --no-binary :all:`` (the index pip is configured with).

    Args:
        cache_dir: where sdists are kept (default ``settings.SDIST_CACHE``).

    Returns:
        the archive's path (``.tar.gz`` or ``.zip``).

    Raises:
        SdistError: a bad pin, a package or version the index does not have, no sdist of it,
            or pip failing (its last lines quoted); field ``package``.
    """
    name, version = parse_pin(pin)
    if cache_dir is None:
        from django.conf import settings  # noqa: PLC0415 (usable before Django is set up)

        cache_dir = Path(settings.SDIST_CACHE)
    found = _cached(cache_dir, name, version)
    if found:
        return found
    cache_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    argv += ["--disable-pip-version-check", "--no-input", "-d", str(cache_dir)]
    try:
        done = subprocess.run(
            [*argv, f"{name}=={version}"],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SdistError(
            f"package {name}=={version}: pip download took over {PIP_TIMEOUT_S} s; is the "
            "package index reachable?",
            field="package",
        ) from None
    found = _cached(cache_dir, name, version)
    if done.returncode != 0 or found is None:
        said = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        tail = " ".join(said or done.stderr.strip().splitlines()[-2:])
        if "No matching distribution" in done.stderr or "Could not find a version" in tail:
            why = "the package index has no source distribution of that name and version"
        else:
            why = "pip download failed"
        raise SdistError(f"package {name}=={version}: {why} ({tail[:400]})", field="package")
    return found


def _members(archive: Path) -> list[tuple[str, str, int, object]]:
    """``(name, kind, size, handle)`` of each member: kind ``file``, ``dir`` or ``other``."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            out = []
            for info in zipped.infolist():
                mode = info.external_attr >> 16
                link = (mode & 0o170000) == 0o120000
                kind = "dir" if info.is_dir() else ("other" if link else "file")
                out.append((info.filename, kind, info.file_size, info))
            return out
    with tarfile.open(archive, "r:*") as tarred:
        return [
            (m.name, "file" if m.isfile() else "dir" if m.isdir() else "other", m.size, m)
            for m in tarred.getmembers()
        ]


def _read_members(archive: Path, wanted: dict[str, object]) -> dict[str, bytes]:
    out = {}
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zipped:
            for path, info in wanted.items():
                out[path] = zipped.read(info)[: MAX_FILE_BYTES + 1]
        return out
    with tarfile.open(archive, "r:*") as tarred:
        for path, member in wanted.items():
            handle = tarred.extractfile(member)
            out[path] = handle.read(MAX_FILE_BYTES + 1) if handle else b""
    return out


def unpack(archive: Path) -> tuple[dict[str, bytes], list[str]]:
    """The regular files of an sdist below its single top directory, ``{path: bytes}``, and
    notes on what was skipped (links, special files).

    Raises:
        SdistError: an absolute path or ``..``, members outside one top directory, over
            MAX_MEMBERS members, a member over MAX_FILE_BYTES or over MAX_TOTAL_BYTES in all,
            or an archive that cannot be read (field ``package``).
    """

    def refuse(why: str) -> SdistError:
        return SdistError(f"sdist {archive.name}: {why}; refused", field="package")

    try:
        members = _members(archive)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise refuse(f"cannot be read ({exc})") from None
    if len(members) > MAX_MEMBERS:
        raise refuse(f"{len(members)} members, over {MAX_MEMBERS}")
    tops, wanted, notes, total = set(), {}, [], 0
    for name, kind, size, handle in members:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or "\\" in name or not path.parts:
            raise refuse(f"member {name!r} leaves the archive's directory")
        tops.add(path.parts[0])
        if kind == "other":
            notes.append(f"skipped {name}: not a regular file (links are never followed)")
            continue
        if kind == "dir" or len(path.parts) < 2:
            continue
        if size > MAX_FILE_BYTES:
            raise refuse(f"member {name!r} has {size} bytes, over {MAX_FILE_BYTES}")
        total += size
        if total > MAX_TOTAL_BYTES:
            raise refuse(f"over {MAX_TOTAL_BYTES} bytes unpacked")
        inner = PurePosixPath(*path.parts[1:]).as_posix()
        if any(part.endswith(".egg-info") for part in path.parts[1:-1]):
            continue  # setuptools' build output, regenerated by any build
        wanted[inner] = handle
    if len(tops) != 1:
        raise refuse(f"members under {len(tops)} top directories, not one")
    files = _read_members(archive, wanted)
    for path, content in files.items():  # sizes in a header can lie; the bytes cannot
        if len(content) > MAX_FILE_BYTES:
            raise refuse(f"member {path!r} is over {MAX_FILE_BYTES} bytes")
    return dict(sorted(files.items())), notes


def licence_of(files: dict[str, bytes]) -> tuple[str, tuple[str, ...]]:
    """The licence the sdist's ``PKG-INFO`` declares and the paths of its licence texts."""
    texts = tuple(p for p in files if "/" not in p and LICENCE_FILES.match(p))
    raw = files.get("PKG-INFO", b"").decode("utf-8", "replace")
    metadata = email.parser.HeaderParser().parsestr(raw)
    expression = (metadata.get("License-Expression") or "").strip()
    if expression:
        return expression, texts
    declared = (metadata.get("License") or "").strip()
    if declared and "\n" not in declared and len(declared) <= 80 and declared != "UNKNOWN":
        return declared, texts
    for classifier in metadata.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            return classifier.split("::")[-1].strip(), texts
    return "", texts


def is_test_file(path: str) -> bool:
    """A module pytest collects by default (``test_*.py`` or ``*_test.py``)."""
    name = PurePosixPath(path).name
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in TEST_FILE_PATTERNS)


def _is_source(path: str) -> bool:
    parts = PurePosixPath(path).parts
    if not path.endswith(".py") or is_test_file(path):
        return False
    if parts[-1] in ("conftest.py", "setup.py", "noxfile.py", "fabfile.py"):
        return False
    if any(part in ("tests", "test", "testing") for part in parts[:-1]):
        return False
    return parts[0] not in NOT_SOURCE_DIRS


def read_project(archive: Path) -> Project:
    """The :class:`Project` in ``archive``.

    Raises:
        SdistError: see :func:`unpack`; an archive name that is not an sdist's; no test
            modules (``test_*.py``/``*_test.py``) or no source modules in it.
    """
    try:
        name, version = parse_sdist_filename(archive.name)
    except InvalidSdistFilename:
        raise SdistError(f"{archive.name} is not a source distribution's name") from None
    files, notes = unpack(archive)
    tests = tuple(p for p in files if is_test_file(p))
    label = f"{name}=={version}"
    if not tests:
        raise SdistError(
            f"package {label}: its sdist carries no test modules (test_*.py or *_test.py), so "
            "no bug can be checked by its suite; choose a project whose sdist ships its tests",
            field="package",
        )
    sources = tuple(p for p in files if _is_source(p))
    if not sources:
        raise SdistError(
            f"package {label}: its sdist has no Python source modules", field="package"
        )
    src_layout = any(p.startswith("src/") for p in sources)
    licence, texts = licence_of(files)
    return Project(
        name=str(name),
        version=str(version),
        files=files,
        licence=licence,
        licence_files=texts,
        test_files=tests,
        source_files=sources,
        pythonpath="src" if src_layout else ".",
        archive=archive.name,
        notes=notes,
    )
