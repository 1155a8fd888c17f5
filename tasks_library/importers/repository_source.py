"""A repository's files at one commit, read from what the user points to: a local git repository
(``git archive COMMIT``) or an archive of the tree (``.tar``, ``.tar.gz``, ``.tgz``, ``.zip``).
Nothing is fetched from the network.

An archive made by ``git archive`` records the commit it was made from (a tar's pax
``comment``, a zip's comment); when it does, a different ``base_commit`` is refused. An archive
whose every entry lies under one top directory (``project-1.0/...``, as GitHub and sdists make
them) is read from inside that directory. Symbolic links, submodules and ``.git`` are left out:
a task's workspace is regular files.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path

from console.core.errors import InputError

MAX_TREE_BYTES = 512 * 1024 * 1024
_COMMIT = re.compile(r"^[0-9a-fA-F]{4,64}$")
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")


class RepositorySourceError(InputError):
    """A repository that cannot be read at the commit asked for (the message says why)."""


def _git(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        env={**os.environ, **_GIT_ENV},
        check=False,
        timeout=600,
    )


def is_git_repository(path: Path) -> bool:
    """``path`` is a git work tree or a bare repository."""
    return path.is_dir() and _git(path, "rev-parse", "--git-dir").returncode == 0


def tree_at(path: Path, commit: str | None) -> dict[str, bytes]:
    """The regular files of the repository at ``path`` as of ``commit``, ``{path: bytes}``.

    Args:
        path: a git repository (work tree or bare), or an archive (see the module).
        commit: a commit id (or any name git resolves to a commit); for an archive, checked
            against the commit the archive records, if it records one.

    Raises:
        RepositorySourceError: ``path`` does not exist or is neither; ``commit`` is not a commit
            of the repository (or not the archive's); the archive is unreadable or over 512 MiB.
    """
    if not path.exists():
        raise RepositorySourceError(f"repository {str(path)!r} does not exist")
    if path.is_dir():
        if not is_git_repository(path):
            raise RepositorySourceError(
                f"repository {str(path)!r} is a directory but not a git repository; point to a "
                "git repository or a .tar/.tar.gz/.zip archive of the tree"
            )
        return _git_tree(path, commit)
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise RepositorySourceError(
            f"repository {str(path)!r} is a file but not an archive ({', '.join(ARCHIVE_SUFFIXES)})"
        )
    try:
        if path.name.endswith(".zip"):
            return _zip_tree(path, commit)
        return _tar_tree(path, commit)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise RepositorySourceError(f"archive {str(path)!r} cannot be read: {exc}") from None


def _git_tree(path: Path, commit: str | None) -> dict[str, bytes]:
    if not commit or commit.startswith("-"):
        raise RepositorySourceError(f"base_commit {commit!r} is not a commit name")
    found = _git(path, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if found.returncode != 0:
        raise RepositorySourceError(
            f"base_commit {commit!r} is not a commit of the repository {str(path)!r} (fetch it "
            "there first; nothing is fetched from the network)"
        )
    sha = found.stdout.decode().strip()
    archived = _git(path, "archive", "--format=tar", sha)
    if archived.returncode != 0:
        raise RepositorySourceError(
            f"git archive {sha} in {str(path)!r} failed: "
            + archived.stderr.decode("utf-8", "replace").strip()
        )
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        return _strip_top(_tar_members(tar), strip=False)


def _check_recorded(path: Path, recorded: str, commit: str | None) -> None:
    recorded = recorded.strip()
    if commit and _COMMIT.match(recorded) and _COMMIT.match(commit):
        short = min(len(recorded), len(commit))
        if recorded[:short].lower() != commit[:short].lower():
            raise RepositorySourceError(
                f"archive {str(path)!r} was made from commit {recorded}, not base_commit {commit}"
            )


def _tar_members(tar: tarfile.TarFile) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for member in tar:
        if not member.isfile():
            continue
        total += member.size
        if total > MAX_TREE_BYTES:
            raise RepositorySourceError(f"the tree is over {MAX_TREE_BYTES} bytes")
        handle = tar.extractfile(member)
        files[member.name] = handle.read() if handle else b""
    return files


def _tar_tree(path: Path, commit: str | None) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        files = _tar_members(tar)
        _check_recorded(path, tar.pax_headers.get("comment", ""), commit)
    return _strip_top(files)


def _zip_tree(path: Path, commit: str | None) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        _check_recorded(path, archive.comment.decode("ascii", "replace"), commit)
        files: dict[str, bytes] = {}
        total = 0
        for info in archive.infolist():
            is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
            if info.is_dir() or is_link:
                continue
            total += info.file_size
            if total > MAX_TREE_BYTES:
                raise RepositorySourceError(f"the tree is over {MAX_TREE_BYTES} bytes")
            files[info.filename] = archive.read(info)
    return _strip_top(files)


def _strip_top(files: dict[str, bytes], *, strip: bool = True) -> dict[str, bytes]:
    """Paths normalised (no ``./``), ``.git`` left out, and a single top directory removed."""
    clean = {}
    for name, content in files.items():
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if parts and ".git" not in parts:
            clean["/".join(parts)] = content
    tops = {name.split("/", 1)[0] for name in clean}
    if strip and len(tops) == 1 and all("/" in name for name in clean):
        top = tops.pop() + "/"
        clean = {name[len(top) :]: content for name, content in clean.items()}
    return dict(sorted(clean.items()))
