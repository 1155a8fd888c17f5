"""From a session to a fresh grading: the files to grade, and nothing else of the session.

Grading never runs in the session: the grader takes the session's changes (file contents
only: :meth:`Session.changes`), applies them to the task's own files and runs the hidden
tests in a fresh sandbox (``sandboxes/grading.py``). No process, memory, open file, /tmp
content or kept daemon of the session reaches it. Files that configure or are the tests
(``conftest.py``, ``pytest.ini``...) are taken from the task, whatever the session did to
them (DESIGN.md: "Reset the tests before grading").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Test configuration a session could plant or change to fake a pass: restored from the
# task (or removed when the task has none). Callers add their suite's test files.
DEFAULT_RESTORE = (
    "conftest.py",
    "*/conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "sitecustomize.py",
    "*/sitecustomize.py",
    "usercustomize.py",
    "*.pth",
)


@dataclass(frozen=True)
class WorkspaceChanges:
    """What a session changed in its workspace (:meth:`Session.changes`).

    Attributes:
        files: ``{path: content}`` of every file added or modified.
        executable: the paths among ``files`` with mode 0755.
        symlinks: ``{path: target}`` of every link added or changed (not carried to grading).
        deleted: the paths of files and links that no longer exist.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    executable: frozenset[str] = frozenset()
    symlinks: dict[str, str] = field(default_factory=dict)
    deleted: tuple[str, ...] = ()


def files_to_grade(
    changes: WorkspaceChanges,
    base: Mapping[str, str | bytes],
    *,
    restore: Iterable[str] = DEFAULT_RESTORE,
) -> dict[str, bytes]:
    """The final workspace for a grading: ``base`` (the task's files, e.g.
    ``Workspace.files()``) with the session's changes applied.

    Links are not carried (a grading writes plain files): a link the session put in place
    of a file removes that file. Every path matching a pattern of ``restore`` (``fnmatch``
    on the workspace-relative path) is the task's version, or absent when the task has none.

    Returns:
        ``{path: content}``, sorted by path.
    """
    patterns = tuple(restore)

    def protected(path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)

    final = {p: c.encode("utf-8") if isinstance(c, str) else bytes(c) for p, c in base.items()}
    for path in (*changes.deleted, *changes.symlinks):
        if not protected(path):
            final.pop(path, None)
    for path, content in changes.files.items():
        if not protected(path):
            final[path] = content
    return dict(sorted(final.items()))


def text_files(files: Mapping[str, bytes]) -> dict[str, str]:
    """``files`` decoded as UTF-8, as the Python grader's ``files`` argument takes them.

    Raises:
        ValueError: naming the files that are not UTF-8 text.
    """
    out, binary = {}, []
    for path, content in files.items():
        try:
            out[path] = content.decode("utf-8")
        except UnicodeDecodeError:
            binary.append(path)
    if binary:
        raise ValueError(f"not UTF-8 text (the Python grader writes text files): {binary[:10]}")
    return out
