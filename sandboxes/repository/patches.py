"""Unified diffs between file trees, made and applied with git (the field's patch format).

A repository task's reference patch, a SWE-bench row's ``patch`` and ``test_patch``, and an
agent's final workspace diff are all git-style unified diffs (``diff --git a/PATH b/PATH``,
``/dev/null`` for added and deleted files, ``GIT binary patch`` for bytes that are not text).
Both directions run ``git`` on the host in a temporary repository that holds only the paths
the diff touches, so the cost grows with the change, not with the repository.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from core.gitenv import clean_git_env
from sandboxes.sessions.workspace import check_path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "crucible",
    "GIT_AUTHOR_EMAIL": "crucible@localhost",
    "GIT_COMMITTER_NAME": "crucible",
    "GIT_COMMITTER_EMAIL": "crucible@localhost",
}
# ``diff --git a/X b/Y``: the paths a patch touches (quoted paths are refused: see patched_paths).
_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_TRADITIONAL = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", re.MULTILINE)


class PatchError(ValueError):
    """A patch that cannot be read or does not apply; the message names the file and hunk."""


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=clean_git_env(str(cwd), **_IDENTITY),  # no configuration but Crucible's
        check=False,
        timeout=120,
    )


def _write(root: Path, files: Mapping[str, bytes]) -> None:
    for path, content in files.items():
        target = root / check_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else bytes(content)


def make_patch(before: Mapping[str, str | bytes], after: Mapping[str, str | bytes]) -> str:
    """The git-style unified diff that turns ``before`` into ``after`` (``{path: content}``).

    Paths are sorted; added files come from ``/dev/null``, deleted ones go to it; content that is
    not UTF-8 text is a ``GIT binary patch``. Identical trees give ``""``.

    Raises:
        ValueError: a path that is absolute, has ``..`` or is otherwise not a workspace path.
    """

    def differs(path: str) -> bool:
        if path not in before or path not in after:
            return True
        return _as_bytes(before[path]) != _as_bytes(after[path])

    changed = sorted(path for path in {*before, *after} if differs(path))
    if not changed:
        return ""
    with tempfile.TemporaryDirectory(prefix="crucible-patch-") as tmp:
        root = Path(tmp)
        _git(root, "init", "-q")
        _write(root, {p: _as_bytes(before[p]) for p in changed if p in before})
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "--allow-empty", "--no-verify", "-m", "before")
        for path in changed:
            target = root / path
            if path in after:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_as_bytes(after[path]))
            elif target.exists():
                target.unlink()
        _git(root, "add", "-A")
        done = _git(root, "diff", "--cached", "--binary", "--no-color", "--no-renames", "HEAD")
        if done.returncode != 0:
            raise RuntimeError(f"git diff failed: {done.stderr.decode('utf-8', 'replace')}")
        return done.stdout.decode("utf-8")


def patched_paths(patch: str) -> list[str]:
    """The paths ``patch`` reads or writes, in order of first appearance.

    Raises:
        PatchError: the text holds no file header, or a path is not a workspace path.
    """
    found = [p for pair in _HEADER.findall(patch) for p in pair]
    if not found:
        found = [p for p in _TRADITIONAL.findall(patch) if p != "/dev/null" and p != "dev/null"]
    if not found:
        raise PatchError("not a unified diff: no 'diff --git a/... b/...' or '--- a/...' header")
    paths: list[str] = []
    for path in found:
        try:
            check_path(path)
        except ValueError as exc:
            raise PatchError(f"patch path {path!r}: {exc}") from None
        if path not in paths:
            paths.append(path)
    return paths


def apply_patch(files: Mapping[str, str | bytes], patch: str) -> dict[str, bytes]:
    """``files`` with ``patch`` applied (``git apply``: every hunk must apply exactly).

    Returns:
        a new ``{path: content}``: patched files replaced, added ones added, deleted ones gone;
        every other file as given. ``files`` itself is not changed. An empty patch returns a copy.

    Raises:
        PatchError: the patch cannot be read, or a hunk does not apply (git's message, which
            names the file and the hunk's line).
    """
    result = {path: _as_bytes(content) for path, content in files.items()}
    if not patch.strip():
        return result
    paths = patched_paths(patch)
    with tempfile.TemporaryDirectory(prefix="crucible-apply-") as tmp:
        root = Path(tmp)
        _git(root, "init", "-q")
        _write(root, {p: result[p] for p in paths if p in result})
        text = patch if patch.endswith("\n") else patch + "\n"
        done = _git(root, "apply", "--whitespace=nowarn", "-", stdin=text.encode("utf-8"))
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().replace("error: ", "")
            raise PatchError(f"patch does not apply: {message}")
        for path in paths:
            target = root / path
            if target.is_symlink():  # a link's target would be read from the host
                raise PatchError(f"patch makes {path!r} a symbolic link; links are not supported")
            if target.is_file():
                result[path] = target.read_bytes()
            else:
                result.pop(path, None)
    return result
