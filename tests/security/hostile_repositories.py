"""Hostile git repositories for the corpus (tests/security/test_hostile_inputs_corpus.py): each
builder makes one under a directory and returns ``(repository path, base_commit to ask for)``;
commands they arm touch files under the markers directory."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.tasks_library.hostile_git import GIT_ENV, git, hostile_repository

PROJECT = {"calc/ops.py": b"def add(a, b):\n    return a + b\n", "tests/test_ops.py": b"x = 1\n"}


def _plain(root: Path) -> str:
    root.mkdir(parents=True)
    git(root, "init", "-q", "--template=")
    for name, data in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base", "--no-verify")
    return git(root, "rev-parse", "HEAD")


def _blob(root: Path, data: bytes) -> str:
    return (
        subprocess.run(
            ["git", "-C", str(root), "hash-object", "-w", "--stdin"],
            input=data,
            capture_output=True,
            env=GIT_ENV,
            check=True,
        )
        .stdout.decode()
        .strip()
    )


def many_entries(root: Path, markers: Path) -> tuple[Path, str]:
    _plain(root)
    blob = _blob(root, b"x")
    entries = [f"100644 blob {blob}\tf{i:05d}".encode() for i in range(50_001)]
    return root, _with_tree_at(root, entries)


def big_blob(root: Path, markers: Path) -> tuple[Path, str]:
    _plain(root)
    blob = _blob(root, b"\0" * (40 * 1024**2))
    return root, _with_tree_at(root, [f"100644 blob {blob}\tdata.bin".encode()])


def _with_tree_at(root: Path, entries: list[bytes]) -> str:
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-tree", "-z", "HEAD"],
        capture_output=True,
        env=GIT_ENV,
        check=True,
    ).stdout.split(b"\0")
    lines = [line for line in listed if line] + entries
    tree = (
        subprocess.run(
            ["git", "-C", str(root), "mktree", "-z", "--missing"],
            input=b"\0".join(lines) + b"\0",
            capture_output=True,
            env=GIT_ENV,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    return git(root, "commit-tree", tree, "-m", "tree")


def named(raw: bytes) -> Callable[[Path, Path], tuple[Path, str]]:
    def build(root: Path, markers: Path) -> tuple[Path, str]:
        _plain(root)
        blob = _blob(root, b"x = 1\n")
        return root, _with_tree_at(root, [b"100644 blob " + blob.encode() + b"\t" + raw])

    return build


def symlink_and_submodule(root: Path, markers: Path) -> tuple[Path, str]:
    _plain(root)
    target = _blob(root, b"/etc/passwd")
    entries = [
        f"120000 blob {target}\tpasswd".encode(),
        f"160000 commit {'1' * 40}\tsub".encode(),
    ]
    return root, _with_tree_at(root, entries)


def replaced_commit(root: Path, markers: Path) -> tuple[Path, str]:
    """A replace ref swaps the asked commit for one whose tree holds other code."""
    base = _plain(root)
    (root / "calc/ops.py").write_bytes(b"import os; os.system('touch EVIL')\n")
    git(root, "commit", "-qam", "evil", "--no-verify")
    evil = git(root, "rev-parse", "HEAD")
    git(root, "replace", base, evil)
    return root, base


def grafted(root: Path, markers: Path) -> tuple[Path, str]:
    base = _plain(root)
    (root / ".git/info").mkdir(exist_ok=True)
    (root / ".git/info/grafts").write_text(f"{base} {'2' * 40}\n")
    (root / ".git/info/attributes").write_text("* filter=evil\n")
    git(root, "config", "filter.evil.smudge", f"touch {markers}/smudge")
    return root, base


def option_commit(option: str) -> Callable[[Path, Path], tuple[Path, str]]:
    def build(root: Path, markers: Path) -> tuple[Path, str]:
        _plain(root)
        return root, option.replace("MARKERS", str(markers))

    return build


def gitdir_file(root: Path, markers: Path) -> tuple[Path, str]:
    root.mkdir(parents=True)
    (root / ".git").write_text("gitdir: /etc\n")
    return root, "HEAD"


def alternates_elsewhere(root: Path, markers: Path) -> tuple[Path, str]:
    base = _plain(root)
    (root / ".git/objects/info").mkdir(exist_ok=True)
    (root / ".git/objects/info/alternates").write_text("/etc\n/root/.ssh\n")
    return root, base


def linked_refs(root: Path, markers: Path) -> tuple[Path, str]:
    _plain(root)
    (root / ".git/refs/heads/shadow").symlink_to("/etc/shadow")
    return root, "main" if (root / ".git/refs/heads/main").exists() else "master"


def huge_packed_refs(root: Path, markers: Path) -> tuple[Path, str]:
    base = _plain(root)
    with open(root / ".git/packed-refs", "ab") as handle:
        handle.truncate(300 * 1024**2)  # sparse: no disk, but its size is what is checked
    return root, base


def bare(root: Path, markers: Path) -> tuple[Path, str]:
    source = root.parent / f"{root.name}-source"
    base = _plain(source)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(source), str(root)], env=GIT_ENV, check=True
    )
    return root, base


def worktree(root: Path, markers: Path) -> tuple[Path, str]:
    source = root.parent / f"{root.name}-main"
    base = _plain(source)
    git(source, "worktree", "add", "-q", "--detach", str(root), base)
    return root, base


def armed(root: Path, markers: Path) -> tuple[Path, str]:
    return root, hostile_repository(root, PROJECT, markers)


REPOSITORIES: dict[str, tuple[Callable[[Path, Path], tuple[Path, str]], str | None]] = {
    # name: (builder(root, markers), the refusal's words, or None: it imports)
    "filters, textconv, fsmonitor, hooks, hooksPath, include, ext:: submodule": (armed, None),
    "base_commit is an option (--output)": (
        option_commit("--output=MARKERS/out"),
        "is not a commit name",
    ),
    "base_commit is an option (--upload-pack)": (
        option_commit("--upload-pack=touch MARKERS/upload"),
        "is not a commit name",
    ),
    "base_commit names no commit": (option_commit("0" * 40), "is not a commit of the repository"),
    "a .git file pointing at /etc": (gitdir_file, "has no object directory"),
    "alternates pointing at /etc and /root": (alternates_elsewhere, None),
    "a ref that is a link to /etc/shadow": (linked_refs, None),
    "a packed-refs file of 300 MiB": (huge_packed_refs, "packed-refs is over"),
    "a tree of 50,001 entries": (many_entries, "more than 50000 entries"),
    "a blob of 40 MiB": (big_blob, "over the 33554432 byte limit"),
    "a path that is not UTF-8": (named(b"bad\xff.py"), "is not valid UTF-8"),
    "a path with a newline": (named(b"a\nb.py"), "control character U+000A"),
    "a path with an escape sequence": (named(b"\x1b]0;owned\x07.py"), "control character U+001B"),
    "a symbolic link and a submodule (left out)": (symlink_and_submodule, None),
    "a replace ref swapping the commit": (replaced_commit, None),
    "grafts and info/attributes": (grafted, None),
    "a bare repository": (bare, None),
    "a linked work tree": (worktree, None),
}
