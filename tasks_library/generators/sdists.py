"""A real project's source distribution: fetched from the package index by exact version
(:mod:`.package_index`: the file itself, sha256-checked; nothing of the project runs), unpacked
safely, its licence and layout read.

The archive is read into memory (``{path: bytes}``), never extracted onto the disk, with its
bounds held while it is read (:mod:`core.archives`): a member that is an absolute path
or a path with ``..`` is refused, links and special files are skipped, and the archive's size,
member count, every member's size, the total and the compression ratio are capped, so a hostile
sdist (a tar bomb, a link to ``/etc``, a million members) cannot write or read outside the
workspace it becomes, nor exhaust memory on the way. Everything the generator runs of the
project (its tests, its modules) runs in the sandbox.
"""

from __future__ import annotations

import email.parser
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from core.archives import ArchiveLimits, ArchiveRefused, read_archive
from core.errors import InputError
from tasks_library.generators.package_index import PackageIndexError, download, sdist_file

MAX_TOTAL_BYTES = 64 * 1024 * 1024  # unpacked, all members together
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_MEMBERS = 5000
MAX_RATIO = 100.0  # unpacked bytes over packed, past the first MiB
# pytest's default ``python_files`` (a project's own ini may say otherwise; these five don't).
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")
# Directories whose Python files are neither the package nor its tests.
NOT_SOURCE_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools"}
# Trove classifiers' licence names that map to one SPDX id (others are kept as written).
CLASSIFIER_SPDX = {
    "MIT License": "MIT",
    "ISC License (ISCL)": "ISC",
    "Python Software Foundation License": "PSF-2.0",
    "The Unlicense (Unlicense)": "Unlicense",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
}
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


def fetch(pin: str, *, cache_dir: Path | None = None, index: str | None = None) -> Path:
    """The sdist of ``pin`` (``NAME==VERSION``), from ``cache_dir`` or else downloaded there from
    the package index (:mod:`.package_index`: the index's file for exactly that version, checked
    against the sha256 the index gives; no pip, no build backend, nothing of it run).

    Args:
        cache_dir: where sdists are kept (default ``settings.SDIST_CACHE``).
        index: the simple repository API's URL (default ``settings.PACKAGE_INDEX_URL``).

    Returns:
        the archive's path (``.tar.gz`` or ``.zip``).

    Raises:
        SdistError: a bad pin, a package or version the index does not have, no sdist of it,
            a download over the size cap or not matching its sha256, or an index that cannot
            be reached (field ``package``).
    """
    name, version = parse_pin(pin)
    if cache_dir is None:
        from django.conf import settings  # noqa: PLC0415 (usable before Django is set up)

        cache_dir = Path(settings.SDIST_CACHE)
    found = _cached(cache_dir, name, version)
    if found:
        return found
    try:
        return download(
            sdist_file(name, version, index=index), cache_dir, max_bytes=MAX_TOTAL_BYTES
        )
    except PackageIndexError as exc:
        raise SdistError(f"package {name}=={version}: {exc}", field="package") from None


def unpack(archive: Path) -> tuple[dict[str, bytes], list[str]]:
    """The regular files of an sdist below its single top directory, ``{path: bytes}``, and
    notes on what was skipped (links, special files).

    Raises:
        SdistError: an absolute path or ``..``, a name that is not UTF-8 or holds a control
            character, members outside one top directory, over MAX_MEMBERS members, a member
            over MAX_FILE_BYTES or over MAX_TOTAL_BYTES in all, a compression ratio over
            MAX_RATIO, or an archive that cannot be read (field ``package``).
    """

    def refuse(why: str) -> SdistError:
        return SdistError(f"sdist {archive.name}: {why}; refused", field="package")

    if archive.stat().st_size > MAX_TOTAL_BYTES:
        raise refuse(f"{archive.stat().st_size} bytes, over {MAX_TOTAL_BYTES}")
    limits = ArchiveLimits(
        members=MAX_MEMBERS,
        file_bytes=MAX_FILE_BYTES,
        total_bytes=MAX_TOTAL_BYTES,
        ratio=MAX_RATIO,
    )
    tops, files, notes = set(), {}, []
    try:
        for member in read_archive(archive, label=archive.name, limits=limits):
            parts = member.name.split("/")
            if "\\" in member.name or not member.name:
                raise refuse(f"member {member.name!r} leaves the archive's directory")
            tops.add(parts[0])
            if member.kind in ("symlink", "other"):
                notes.append(
                    f"skipped {member.name}: not a regular file (links are never followed)"
                )
                continue
            if member.kind == "dir" or len(parts) < 2:
                continue
            if any(part.endswith(".egg-info") for part in parts[1:-1]):
                continue  # setuptools' build output, regenerated by any build
            files["/".join(parts[1:])] = member.data
    except ArchiveRefused as exc:
        raise SdistError(str(exc), field="package") from None
    if len(tops) != 1:
        raise refuse(f"members under {len(tops)} top directories, not one")
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
            name = classifier.split("::")[-1].strip()
            return CLASSIFIER_SPDX.get(name, name), texts
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
