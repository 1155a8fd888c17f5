"""A terminal session's state: where its directories are mounted, and what they start with.

A terminal task's starting state is a file tree at absolute paths (``/app``, the
``/etc/nginx`` files it copies, ``/var/log/app``). It travels as an ordinary workspace whose
paths are the absolute ones without their leading ``/`` (``app/data.csv``), with the
*state directories* the task asked for (its working directory, where it copies files).
The worker that opens the session decides, against the environment's root, how each is
mounted (:func:`state_layout`):

- a directory under one the sandbox binds from the root (``/usr``, ``/etc``, ``/bin``...) is
  mounted at its deepest ancestor the root holds as a directory (``/etc/myapp``, absent from
  the root: ``/etc``); a path through a link of the root (``/bin`` is ``usr/bin``) is refused;
- any other directory (``/app``, ``/srv``, ``/var/log/app``) is a top-level directory of the
  session's own root, mounted where it says;
- a mounted directory the root also holds starts with the root's files in it (those the task
  does not replace): ``/etc/nginx`` keeps Debian's ``mime.types`` beside the task's
  ``nginx.conf``. Every file of a state directory belongs to the session's user.

The session's init then binds each directory from the workspace onto its path
(``harness/session_init.py``), so the workspace diff sees every change the agent makes there.
Standard library only (runs in the worker).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections import OrderedDict
from pathlib import Path

from sandboxes.sessions.workspace import Entry, Workspace

# The top-level entries a session's root binds from the environment's root (harness/zygote.py
# SYSTEM_DIRS): a state directory under one of them must exist there.
BOUND_FROM_ROOT = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
NOT_STATE = ("proc", "dev", "sys", "tmp", "workspace", ".store", ".old", "env")
MAX_STATE_DIRS = 64
MAX_MERGED_ENTRIES = 20_000  # files of the root copied into state directories, in all
MAX_MERGED_BYTES = 128 * 1024**2
CACHE_SIZE = 32


class StateLayoutError(ValueError):
    """A state directory that cannot be mounted as asked (the message names it)."""


def in_state_dirs(path: str, state_dirs) -> bool:
    """Whether the workspace path ``path`` (an absolute path without its leading ``/``) lies
    inside one of ``state_dirs`` (absolute directories)."""
    return any(path.startswith(d.lstrip("/") + "/") for d in state_dirs)


def check_dir(path: str) -> str:
    """``path`` if it is a normalised absolute directory a state may occupy.

    Raises:
        StateLayoutError: naming it and what is wrong.
    """
    if (
        not isinstance(path, str)
        or not path.startswith("/")
        or path == "/"
        or posixpath.normpath(path) != path
        or "\0" in path
        or len(path) > 1024
    ):
        raise StateLayoutError(f"state directory {str(path)[:100]!r} is not an absolute path")
    if path.split("/")[1] in NOT_STATE:
        raise StateLayoutError(
            f"state directory {path!r} lies where the sandbox mounts its own "
            f"({', '.join('/' + n for n in NOT_STATE)})"
        )
    return path


def _mount_point(path: str, root: Path | None) -> str:
    """Where ``path`` is mounted in a session on ``root`` (None: the host's system)."""
    parts = path.strip("/").split("/")
    if parts[0] not in BOUND_FROM_ROOT:
        return path
    base = root if root is not None else Path("/")
    current = base
    deepest = ""
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise StateLayoutError(
                f"state directory {path!r} goes through /{current.relative_to(base)}, a link in "
                "the environment's root; name the directory it leads to"
            )
        if not current.is_dir():
            break
        deepest = f"{deepest}/{part}"
    if not deepest:
        raise StateLayoutError(
            f"state directory {path!r}: the environment's root has no /{parts[0]}"
        )
    if root is None and deepest.count("/") < 2:
        raise StateLayoutError(
            f"state directory {path!r} would cover the host's {deepest}: a terminal task runs on "
            "a Debian root (FROM debian or python in its Dockerfile)"
        )
    return deepest


def _collapse(mounts: dict[str, bool]) -> list[list[str]]:
    """``[[path, "rw"|"ro"]]``, each directory inside another folded into it (writable when
    any folded one is)."""
    kept: dict[str, bool] = {}
    for path in sorted(mounts):
        outer = next((k for k in kept if path.startswith(k + "/")), None)
        if outer is None:
            kept[path] = mounts[path]
        else:
            kept[outer] = kept[outer] or mounts[path]
    return [[path, "rw" if writable else "ro"] for path, writable in kept.items()]


def _root_entries(root: Path, mount: str, have: dict[str, str], budget: list[int]) -> list[Entry]:
    """The entries of ``root`` under ``mount`` that the workspace does not hold (nor hide
    under a file or link of its own), as workspace entries; links kept as links, special
    files left out."""
    top = root / mount.lstrip("/")
    if top.is_symlink() or not top.is_dir():
        return []
    found = []
    for current, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        for name in sorted(dirs + files):
            full = Path(current) / name
            rel = full.relative_to(root).as_posix()
            parent = rel.rpartition("/")[0]
            if rel in have or any(have.get(p) in ("file", "symlink") for p in _ancestors(parent)):
                continue
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                entry = Entry(
                    rel, "symlink", 0o777, os.readlink(full).encode("utf-8", "surrogateescape")
                )
            elif stat.S_ISDIR(info.st_mode):
                entry = Entry(rel, "dir", 0o755)
            elif stat.S_ISREG(info.st_mode):
                mode = 0o755 if info.st_mode & 0o111 else 0o644
                entry = Entry(rel, "file", mode, full.read_bytes())
            else:
                continue
            budget[0] -= 1
            budget[1] -= len(entry.data)
            if budget[0] < 0 or budget[1] < 0:
                raise StateLayoutError(
                    f"state directory {mount!r} holds more of the environment's root than a "
                    f"session copies ({MAX_MERGED_ENTRIES} entries, "
                    f"{MAX_MERGED_BYTES // 1024**2} MiB): copy into a narrower directory"
                )
            found.append(entry)
    return found


def _ancestors(path: str):
    while path:
        yield path
        path = path.rpartition("/")[0]


def state_layout(
    workspace: Workspace, state_dirs: list, root: Path | None
) -> tuple[Workspace, list[list[str]]]:
    """The workspace a terminal session is materialised from, and its mounts.

    Args:
        workspace: the state at absolute paths without the leading ``/``.
        state_dirs: ``[[path, "rw"|"ro"], ...]`` as the caller asked.
        root: the environment's root tree on this worker; None: the host's system (no root
            files are copied from the host).

    Returns:
        ``(workspace with the root's files of each mounted directory added, [[mount, mode]])``.

    Raises:
        StateLayoutError: a bad entry (named), too many, or too much of the root to copy.
    """
    if not isinstance(state_dirs, list) or not 0 < len(state_dirs) <= MAX_STATE_DIRS:
        raise StateLayoutError(f"state_dirs must list 1 to {MAX_STATE_DIRS} directories")
    mounts: dict[str, bool] = {}
    for entry in state_dirs:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[1] in ("rw", "ro")):
            raise StateLayoutError(f"state directory {str(entry)[:100]!r} is not [path, 'rw'|'ro']")
        point = _mount_point(check_dir(entry[0]), root)
        mounts[point] = mounts.get(point, False) or entry[1] == "rw"
    layout = _collapse(mounts)
    entries = {e.path: e for e in workspace.entries}
    have = {path: e.kind for path, e in entries.items()}
    for path, _mode in layout:
        rel = path.lstrip("/")
        if have.get(rel, "dir") != "dir":
            raise StateLayoutError(f"state directory {path!r} is a file of the task's state")
        for parent in _ancestors(rel):
            if have.get(parent, "dir") != "dir":
                raise StateLayoutError(f"state directory {path!r} lies under the file /{parent}")
            entries.setdefault(parent, Entry(parent, "dir", 0o755))
    budget = [MAX_MERGED_ENTRIES, MAX_MERGED_BYTES]
    if root is not None:
        for path, _mode in layout:
            for entry in _root_entries(root, path, have, budget):
                entries[entry.path] = entry
    return Workspace(entries.values()), layout


class LayoutCache:
    """The last :data:`CACHE_SIZE` layouts a worker made (a group of sessions of one task
    opens the same state N times): ``(digest, root, dirs) -> (Workspace, mounts)``."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple, tuple[Workspace, list]] = OrderedDict()

    def get(self, digest: str, load_blob, state_dirs: list, root: Path | None):
        key = (digest, str(root), repr(state_dirs))
        found = self.items.pop(key, None)
        if found is None:
            workspace = Workspace.from_blob(load_blob())
            if workspace.digest != digest:
                raise ValueError(f"workspace blob's digest is {workspace.digest}, not {digest}")
            found = state_layout(workspace, state_dirs, root)
        self.items[key] = found
        while len(self.items) > CACHE_SIZE:
            self.items.popitem(last=False)
        return found
