"""A git repository whose configuration, attributes, hooks and submodules try to run commands on
whoever reads it: each command would touch a marker file on the host, outside any sandbox."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
HOOKS = (
    "pre-commit", "post-checkout", "post-merge", "pre-push", "post-commit", "reference-transaction",
    "post-index-change", "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "push-to-checkout",
)  # fmt: skip


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, env=GIT_ENV, check=True
    )
    return done.stdout.decode().strip()


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def hostile_repository(root: Path, files: dict[str, bytes], markers: Path) -> str:
    """Commit ``files`` (plus a ``.gitattributes`` naming every driver, a ``.gitmodules`` with an
    ``ext::`` submodule, and an ``export-subst`` file) in a new repository at ``root``, then arm
    it: filter drivers (smudge, clean, process), a textconv, ``core.fsmonitor``,
    ``core.hooksPath`` and ``.git/hooks``, ``include.path``, a pager, an ssh command. Each
    touches a file under ``markers`` if it ever runs. Returns the commit."""
    markers.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True)
    git(root, "init", "-q", "--template=")
    tree = dict(files)
    tree[".gitattributes"] = (
        b"* filter=evil diff=evil merge=evil\n*.py filter=proc\nSUBST export-subst\n"
    )
    tree["SUBST"] = b"$Format:%H$\n"
    tree[".gitmodules"] = (
        b'[submodule "sub"]\n\tpath = sub\n'
        + f"\turl = ext::sh -c touch% {markers}/ext-submodule\n".encode()
    )
    for path, content in tree.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    git(root, "add", "-A")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")
    git(root, "commit", "-qm", "base", "--no-verify")
    commit = git(root, "rev-parse", "HEAD")
    # Armed after the commit: from here on any git command in the repository may run these.
    touch = f"touch {markers}"
    config = {
        "filter.evil.smudge": f"{touch}/smudge; tr a-z A-Z",
        "filter.evil.clean": f"{touch}/clean; cat",
        "filter.evil.required": "true",
        "filter.proc.process": f"sh -c '{touch}/process'",
        "filter.proc.required": "true",
        "diff.evil.textconv": f"sh -c '{touch}/textconv'",
        "merge.evil.driver": f"{touch}/merge",
        "core.fsmonitor": f"{touch}/fsmonitor",
        "core.hooksPath": str(root / "evil-hooks"),
        "core.pager": f"{touch}/pager",
        "core.sshCommand": f"{touch}/ssh",
        "core.askPass": f"{touch}/askpass",
        "core.editor": f"{touch}/editor",
        "protocol.allow": "always",
        "protocol.ext.allow": "always",
        "include.path": str(root / "included.config"),
    }
    for key, value in config.items():
        git(root, "config", key, value)
    (root / "included.config").write_text(
        f'[filter "evil"]\n\tsmudge = "{touch}/included-smudge; cat"\n'
        f'[core]\n\tfsmonitor = "{touch}/included-fsmonitor"\n'
    )
    for directory in (root / "evil-hooks", root / ".git" / "hooks"):
        directory.mkdir(exist_ok=True)
        for hook in HOOKS:
            _script(directory / hook, f"touch {markers}/hook-{hook}")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    return commit


def markers_left(markers: Path) -> list[str]:
    """The markers some command touched (none, when nothing ran)."""
    return sorted(p.name for p in markers.iterdir()) if markers.is_dir() else []


def prove_armed(root: Path, markers: Path, commit: str) -> list[str]:
    """Run ``git archive`` in the repository as the old importer did, into a scratch marker
    directory: it must run the smudge filter (the repository really is hostile)."""
    subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", commit],
        capture_output=True,
        env=GIT_ENV,
        check=False,
    )
    found = markers_left(markers)
    for name in found:
        (markers / name).unlink()
    return found
