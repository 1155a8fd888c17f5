"""The agent's workspace of a repository task is a fresh single-commit git repository: no
history, tags, reflog, other branches, remote, or object that holds anything but its own files
(sandboxes/repository/git.py). The fix of the task below exists only in an earlier commit of
its source repository; nothing in the workspace carries it."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pytest

from sandboxes import result as R
from sandboxes.repository import git_workspace
from sandboxes.sessions import open_session

FIX_MARK = b"FIXED-BOUNDARY-7f3a"  # a string only the fixed version of the code holds
FIXED = (
    b"def clamp(value, low, high):\n"
    b"    # " + FIX_MARK + b"\n"
    b"    return max(low, min(value, high))\n"
)
BUGGY = b"def clamp(value, low, high):\n    return max(low, min(value, high - 1))\n"
OTHER = {"README.md": b"# clamp\n", "tests/test_clamp.py": b"from clamp import clamp\n"}


def _source_repository(root: Path) -> dict[str, bytes]:
    """An upstream-like repository whose history holds the fix (a commit, a tag, a branch, a
    stash-like dangling object), checked out at the buggy state; returns its tracked files."""
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
        "GIT_AUTHOR_NAME": "u",
        "GIT_AUTHOR_EMAIL": "u@x",
        "GIT_COMMITTER_NAME": "u",
        "GIT_COMMITTER_EMAIL": "u@x",
        "PATH": "/usr/bin:/bin",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    for path, content in {**OTHER, "clamp.py": FIXED}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    git("add", "-A")
    git("commit", "-qm", "the fix")
    git("tag", "v1-fixed")
    git("branch", "fixed")
    (root / "clamp.py").write_bytes(BUGGY)
    git("commit", "-qam", "reintroduce the bug")
    return {"clamp.py": BUGGY, **OTHER}


def test_the_same_files_give_the_same_workspace():
    first = git_workspace({"a.py": "x = 1\n", "run.sh": "#!/bin/sh\n"}, executable={"run.sh"})
    second = git_workspace({"run.sh": b"#!/bin/sh\n", "a.py": b"x = 1\n"}, executable=["run.sh"])
    assert first.digest == second.digest
    assert first.executable() == {"run.sh"}
    assert git_workspace({"a.py": "x = 2\n"}).digest != first.digest


def test_bad_input_is_refused_by_name():
    with pytest.raises(ValueError, match=r"\.git"):
        git_workspace({".git/config": b"[core]\n"})
    with pytest.raises(ValueError, match="not files"):
        git_workspace({"a.py": b""}, executable={"b.sh"})
    with pytest.raises(ValueError, match=r"'\.\./x'"):
        git_workspace({"../x": b""})


def test_no_object_of_the_workspace_carries_the_fix(tmp_path):
    files = _source_repository(tmp_path)
    workspace = git_workspace(files)
    for entry in workspace.entries:  # every object, decompressed, on the host side
        assert FIX_MARK not in entry.data
        if entry.path.startswith(".git/objects/") and entry.kind == "file":
            assert FIX_MARK not in zlib.decompress(entry.data)
    paths = {e.path for e in workspace.entries if e.kind == "file"}
    leaks = (".git/logs", ".git/packed-refs", ".git/refs/tags/", ".git/refs/remotes")
    assert not any(p.startswith(leaks) for p in paths)
    assert ".git/COMMIT_EDITMSG" not in paths and not any("/hooks/" in p for p in paths)


@pytest.mark.slow
def test_in_a_session_git_shows_one_commit_and_nothing_else(session_pool, tmp_path):
    files = _source_repository(tmp_path)
    with open_session(git_workspace(files), runtime=session_pool.runtime) as session:

        def run(command: str) -> str:
            result = session.exec(command, timeout_s=30)
            assert result.status == R.OK, (command, result.stdout, result.stderr)
            return result.stdout

        assert len(run("git log --all --format=%H%n").split()) == 1
        assert run("git log --all --format='%an <%ae> %ad %s' --date=iso-strict").strip() == (
            "Crucible <crucible@localhost> 2000-01-01T00:00:00+00:00 "
            "Repository at the start of the task"
        )
        assert run("git reflog") == "" and run("git tag") == "" and run("git remote") == ""
        assert run("git branch --all --format='%(refname)'").split() == ["refs/heads/main"]
        assert run("git stash list") == ""
        assert run("git status --porcelain") == ""  # the files match the commit
        fsck = session.exec("git fsck --lost-found --no-progress 2>&1", timeout_s=30)
        assert fsck.status == R.OK and "dangling" not in fsck.stdout, fsck.stdout
        objects = run("git cat-file --batch-all-objects --batch-check='%(objecttype)'").split()
        # one commit, two trees (root, tests/), one blob per file
        assert sorted(objects) == sorted(["commit", "tree", "tree"] + ["blob"] * len(files))
        contents = session.exec("git cat-file --batch-all-objects --batch", timeout_s=30)
        assert contents.status == R.OK and FIX_MARK.decode() not in contents.stdout
        assert "reintroduce" not in contents.stdout and "the fix" not in contents.stdout
        assert run("git count-objects -v | grep -E '^(packs|size-pack):'").split() == [
            "packs:",
            "0",
            "size-pack:",
            "0",
        ]
        grep = session.exec(f"grep -r -a -l {FIX_MARK.decode()} . ; true", timeout_s=30)
        assert grep.stdout == ""
