"""The agent's workspace of a repository task: its files and a fresh single-commit git repository.

Agents on SWE-bench-style images have read the fix out of the repository's own history
(``git log``, tags, the reflog, other branches, packed or dangling objects). The workspace
built here has none: it is made on the host with the git CLI from the task's files alone,
so the only objects in ``.git`` are that one commit, its trees and the files' blobs.

What ``.git`` holds: ``HEAD`` (``ref: refs/heads/main``), ``config`` (``git init``'s),
``refs/heads/main``, the loose objects of the one commit, and an ``index`` whose entries have
no stat data (``git read-tree``: the first ``git status`` in the session re-hashes the files
and finds them clean). No hooks, no ``description``/``info`` (an empty template), no reflog
(``core.logAllRefUpdates`` off for the commit), no ``COMMIT_EDITMSG``, no tags, no packs, no
remote. Author, committer and dates are fixed, so the same files give the same commit and
the same :class:`~sandboxes.sessions.Workspace` digest (a group of rollouts shares one copy).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from core.gitenv import clean_git_env
from sandboxes.sessions.workspace import Workspace, check_path

BRANCH = "main"
AUTHOR = ("Crucible", "crucible@localhost")
DATE = "2000-01-01T00:00:00+0000"
MESSAGE = "Repository at the start of the task\n"
GIT_TIMEOUT_S = 300.0


class GitWorkspaceError(RuntimeError):
    """The git CLI is missing or one of its steps failed (the message names the step)."""


def _git(root: Path, *args: str) -> str:
    executable = shutil.which("git")
    if executable is None:
        raise GitWorkspaceError("git is not installed on this host (apt-get install git)")
    name, email = AUTHOR
    env = clean_git_env(
        str(root),  # no user configuration reaches the repository
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_AUTHOR_DATE=DATE,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
        GIT_COMMITTER_DATE=DATE,
    )
    done = subprocess.run(
        [executable, *args],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise GitWorkspaceError(f"git {args[0]} failed ({done.returncode}): {message}")
    return done.stdout.decode("utf-8", "replace")


def git_workspace(
    files: Mapping[str, str | bytes], *, executable: Iterable[str] = frozenset()
) -> Workspace:
    """The workspace of ``files`` plus a ``.git`` holding one commit of exactly them (see the
    module).

    Args:
        files: ``{path: content}`` (text is written as UTF-8); no path may lie in a ``.git``
            directory.
        executable: paths among ``files`` committed and written with mode 0755.

    Returns:
        a :class:`~sandboxes.sessions.Workspace` (deterministic: same files, same digest).

    Raises:
        ValueError: a bad path (named), a path inside ``.git``, or ``executable`` naming a
            path that is not in ``files``.
        GitWorkspaceError: git is missing or failed.
    """
    runnable = set(executable)
    unknown = runnable - set(files)
    if unknown:
        raise ValueError(f"executable paths that are not files: {sorted(unknown)[:10]}")
    if not files:
        raise ValueError("a repository workspace needs at least one file")
    for path in files:
        check_path(path)
        if ".git" in path.split("/"):
            raise ValueError(f"workspace path {path!r} lies in a .git directory; leave .git out")
    with tempfile.TemporaryDirectory(prefix="crucible-git-") as scratch:
        root = Path(scratch) / "repository"
        root.mkdir()
        for path, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if path in runnable else 0o644)
        _git(root, "init", "--quiet", "--template=", f"--initial-branch={BRANCH}")
        _git(root, "add", "--all", "--force", ".")
        _git(
            root,
            "-c",
            "core.logAllRefUpdates=false",
            "-c",
            "commit.gpgSign=false",
            "commit",
            "--quiet",
            "--no-verify",
            f"--message={MESSAGE}",
        )
        _git(root, "read-tree", "HEAD")  # an index without stat data: deterministic bytes
        (root / ".git" / "COMMIT_EDITMSG").unlink(missing_ok=True)
        return Workspace.from_directory(root)
