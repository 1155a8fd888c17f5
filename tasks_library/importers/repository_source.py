"""A repository's files at one commit, read from what the user points to: a local git repository
(its objects read directly, nothing of its configuration run: :mod:`.git_objects`) or an archive
of the tree (``.tar``, ``.tar.gz``, ``.tgz``, ``.zip``). Nothing is fetched from the network.

An archive made by ``git archive`` records the commit it was made from (a tar's pax
``comment``, a zip's comment); when it does, a different ``base_commit`` is refused. An archive
whose every entry lies under one top directory (``project-1.0/...``, as GitHub and sdists make
them) is read from inside that directory. Symbolic links, submodules and ``.git`` are left out:
a task's workspace is regular files.

Bounds (:data:`LIMITS`), held while reading (:mod:`core.archives`): 50,000 entries,
32 MiB a file, 512 MiB in all, a compression ratio of at most 100:1; every name valid UTF-8
without control characters.
"""

from __future__ import annotations

import re
from pathlib import Path

from core.archives import ArchiveLimits, ArchiveRefused, archive_comment, read_archive
from core.errors import InputError
from tasks_library.importers.git_objects import GitReadError, commit_files, git_directory

MAX_TREE_BYTES = 512 * 1024 * 1024
LIMITS = ArchiveLimits(
    members=50_000, file_bytes=32 * 1024 * 1024, total_bytes=MAX_TREE_BYTES, ratio=100.0
)
_COMMIT = re.compile(r"^[0-9a-fA-F]{4,64}$")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")


class RepositorySourceError(InputError):
    """A repository that cannot be read at the commit asked for (the message says why)."""


def is_git_repository(path: Path) -> bool:
    """``path`` is a git work tree or a bare repository."""
    return path.is_dir() and git_directory(path) is not None


def tree_at(path: Path, commit: str | None) -> dict[str, bytes]:
    """The regular files of the repository at ``path`` as of ``commit``, ``{path: bytes}``.

    Args:
        path: a git repository (work tree or bare), or an archive (see the module).
        commit: a commit id (or any name git resolves to a commit); for an archive, checked
            against the commit the archive records, if it records one.

    Raises:
        RepositorySourceError: ``path`` does not exist or is neither; ``commit`` is not a commit
            of the repository (or not the archive's); the archive or tree is unreadable, over a
            bound, or names a file with a name that is not UTF-8 or holds a control character.
    """
    if not path.exists():
        raise RepositorySourceError(f"repository {str(path)!r} does not exist")
    if path.is_dir():
        if not is_git_repository(path):
            raise RepositorySourceError(
                f"repository {str(path)!r} is a directory but not a git repository; point to a "
                "git repository or a .tar/.tar.gz/.zip archive of the tree"
            )
        try:
            return commit_files(path, commit or "", limits=LIMITS)
        except GitReadError as exc:
            raise RepositorySourceError(str(exc)) from None
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise RepositorySourceError(
            f"repository {str(path)!r} is a file but not an archive ({', '.join(ARCHIVE_SUFFIXES)})"
        )
    _check_recorded(path, archive_comment(path), commit)
    files: dict[str, bytes] = {}
    try:
        for member in read_archive(path, label=path.name, limits=LIMITS):
            if member.kind == "file":
                files[member.name] = member.data
    except ArchiveRefused as exc:
        raise RepositorySourceError(str(exc)) from None
    return _strip_top(files)


def _check_recorded(path: Path, recorded: str, commit: str | None) -> None:
    recorded = recorded.strip()
    if commit and _COMMIT.match(recorded) and _COMMIT.match(commit):
        short = min(len(recorded), len(commit))
        if recorded[:short].lower() != commit[:short].lower():
            raise RepositorySourceError(
                f"archive {str(path)!r} was made from commit {recorded}, not base_commit {commit}"
            )


def _strip_top(files: dict[str, bytes]) -> dict[str, bytes]:
    """``.git`` left out, and a single top directory removed."""
    clean = {name: content for name, content in files.items() if ".git" not in name.split("/")}
    tops = {name.split("/", 1)[0] for name in clean}
    if len(tops) == 1 and all("/" in name for name in clean):
        top = tops.pop() + "/"
        clean = {name[len(top) :]: content for name, content in clean.items()}
    return dict(sorted(clean.items()))
