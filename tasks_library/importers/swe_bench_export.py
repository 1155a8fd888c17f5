"""Repository task versions as SWE-bench-shaped rows and one local git repository that holds
their trees, so that ``import_tasks swe-bench FILE --repo DIR`` reads them back (with identical
content hashes) and any SWE-bench tool can run them.

Each distinct workspace becomes one root commit of ``DIR`` (written with ``git fast-import``:
fixed author and date, so a tree always gives the same commit), kept by the tag
``crucible/<first 16 hex of the workspace digest>``; a row's ``base_commit`` is that commit.
``test_patch`` turns the workspace's copies of the hidden test files into the hidden files;
``patch`` is the reference patch. Crucible's own fields ride along (``environment``,
``test_command``, ``timeout_s``, ``licence``, ``tags``) and SWE-bench tools ignore them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from core.gitenv import clean_git_env
from sandboxes.repository.patches import make_patch
from tasks_library.repositories import repository_content

REPO = "crucible/tasks"
_IDENTITY = b"Crucible <crucible@localhost> 946684800 +0000"


# The target may be an existing repository: git runs there with none of its configuration that
# runs commands (hooks, fsmonitor, filters are never defined: core.gitenv).
def _env(root: Path) -> dict:
    return clean_git_env(str(root))


class SweBenchExportError(RuntimeError):
    """The git repository could not be written (the message names the step)."""


def _git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        input=stdin,
        capture_output=True,
        env=_env(root),
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SweBenchExportError(
            f"git {args[0]} in {root}: " + done.stderr.decode("utf-8", "replace").strip()
        )
    return done.stdout.decode().strip()


def _quoted(path: str) -> bytes:
    """``path`` as fast-import reads any path: C-style quoted (a name may hold quotes, newlines
    or backslashes; bytes beyond ASCII as octal escapes)."""
    out = []
    for byte in path.encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return ('"' + "".join(out) + '"').encode("ascii")


def _fast_import_commit(ref: str, files: dict[str, bytes]) -> bytes:
    """A ``git fast-import`` stream of one root commit of ``files`` on ``ref``."""
    message = b"Repository task workspace\n"
    parts = [
        f"commit {ref}\n".encode(),
        b"committer " + _IDENTITY + b"\n",
        f"data {len(message)}\n".encode() + message,
    ]
    for path, content in sorted(files.items()):
        parts.append(b"M 100644 inline " + _quoted(path) + f"\ndata {len(content)}\n".encode())
        parts.append(content + b"\n")
    return b"".join(parts) + b"\n"


def _commit_of(root: Path, digest: str, files: dict[str, bytes]) -> str:
    """The commit of one workspace in ``root``, written once (tag ``crucible/<digest[:16]>``)."""
    ref = f"refs/tags/crucible/{digest[:16]}"
    existing = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", ref],
        capture_output=True,
        env=_env(root),
        check=False,
    )
    if existing.returncode == 0:
        return existing.stdout.decode().strip()
    _git(root, "fast-import", "--quiet", stdin=_fast_import_commit(ref, files))
    return _git(root, "rev-parse", ref)


def swe_bench_rows(versions, repository: Path) -> list[dict]:
    """SWE-bench-shaped rows of repository task ``versions`` (function tasks are skipped), their
    trees committed into the git repository ``repository`` (created when absent).

    Returns:
        one row per repository version, in order: ``instance_id`` (the task id), ``repo``,
        ``base_commit``, ``patch``, ``test_patch``, ``problem_statement``, ``FAIL_TO_PASS``,
        ``PASS_TO_PASS`` (lists), and Crucible's ``environment``, ``test_command``,
        ``timeout_s``, ``licence``, ``tags``.

    Raises:
        SweBenchExportError: git failed (named step).
    """
    repository.mkdir(parents=True, exist_ok=True)
    if not (repository / ".git").exists() and not (repository / "HEAD").exists():
        _git(repository, "init", "-q")
    rows = []
    for version in versions:
        if not version.is_repository:
            continue
        content, env, task = repository_content(version), version.environment, version.task
        hidden = content.hidden_files
        rows.append(
            {
                "instance_id": task.task_id,
                "repo": REPO,
                "base_commit": _commit_of(repository, version.workspace_id, content.files),
                "patch": content.reference_patch,
                "test_patch": make_patch(
                    {p: content.files[p] for p in hidden if p in content.files}, hidden
                ),
                "problem_statement": content.problem_statement,
                "FAIL_TO_PASS": list(content.fail_to_pass),
                "PASS_TO_PASS": list(content.pass_to_pass),
                "environment": env.content(),
                "test_command": content.test_command,
                "timeout_s": content.timeout_s,
                "licence": task.licence,
                "tags": list(task.tags),
            }
        )
    return rows
