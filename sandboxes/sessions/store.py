"""Materialised workspaces of one worker process: each one written once, shared read-only.

A :class:`WorkspaceStore` owns one directory (mode 0700, the worker's; nobody else on
the host can enter it) that the session zygote binds read-only at ``/.store``; each
workspace is a subdirectory named by its digest, owned by the sandbox user (so that a
session may change, through its copy-on-write layer, what it was given). Sessions
reference a workspace while they are open; one no session has used for ``keep_s``
seconds is deleted (:meth:`WorkspaceStore.sweep`), and the whole directory goes when the
worker stops (:meth:`WorkspaceStore.close`). A worker killed with SIGKILL cannot delete
its own: any live worker on the host removes the directories of dead owners
(:func:`sweep_dead_owners`; the directory's name carries the owner's pid).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sandboxes.process import NOBODY
from sandboxes.sessions.workspace import Workspace

log = logging.getLogger(__name__)


def owner_name() -> str:
    """A store directory's name for this process: ``<host>-<pid>-<random>``."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class WorkspaceStore:
    """Content-addressed workspaces under ``root`` (see the module). Thread-safe."""

    def __init__(self, root: Path, *, keep_s: float = 60.0) -> None:
        self.root = Path(root)
        self.keep_s = keep_s
        self.lock = threading.Lock()
        self.refs: dict[str, int] = {}
        self.unused_since: dict[str, float] = {}
        self.sizes: dict[str, int] = {}  # digest -> bytes of its materialised files
        self.bytes = 0  # materialised (or being written) here, in all
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        # The sandbox user's uid on the host (see resident._write_id_maps): ``nobody`` as
        # root; otherwise this user, which is uid 0 inside the sandbox.
        self.owner = NOBODY if os.geteuid() == 0 else None

    def path(self, digest: str) -> Path:
        return self.root / digest

    def acquire(
        self,
        digest: str,
        load: Callable[[], bytes],
        *,
        room: Callable[[int, int], None] | None = None,
    ) -> Path:
        """The materialised directory of ``digest``, referenced once more.

        Args:
            load: returns the workspace's blob; called only when it is not here yet.
            room: ``room(bytes stored here, bytes of this workspace)`` raises when a workspace
                not here yet may not be written (a worker's disk budget); its bytes are
                reserved before they are written, so concurrent opens cannot overshoot.

        Raises:
            ValueError: the blob is not a workspace, or its digest is not ``digest``.
            OSError: the directory could not be written (disk full...).
            Exception: what ``room`` raises.
        """
        _check_digest(digest)
        with self.lock:
            if digest in self.refs or self.path(digest).is_dir():
                return self._reference(digest)
        workspace = Workspace.from_blob(load())  # outside the lock: a large one takes a while
        if workspace.digest != digest:
            raise ValueError(f"workspace blob's digest is {workspace.digest}, not {digest}")
        size = workspace.size_bytes
        with self.lock:
            if room is not None:
                room(self.bytes, size)
            self.bytes += size
        try:
            staging = self._materialise(workspace)
        except BaseException:
            with self.lock:
                self.bytes -= size
            raise
        with self.lock:
            if self.path(digest).is_dir():  # another slot wrote it meanwhile (and counted it)
                shutil.rmtree(staging, ignore_errors=True)
                self.bytes -= size
            else:
                os.rename(staging, self.path(digest))
                self.sizes[digest] = size
            return self._reference(digest)

    def _reference(self, digest: str) -> Path:
        self.refs[digest] = self.refs.get(digest, 0) + 1
        self.unused_since.pop(digest, None)
        return self.path(digest)

    def release(self, digest: str) -> None:
        """One session of ``digest`` closed; unused, it is deleted ``keep_s`` later."""
        with self.lock:
            count = self.refs.get(digest, 0) - 1
            if count > 0:
                self.refs[digest] = count
                return
            self.refs.pop(digest, None)
            self.unused_since[digest] = time.monotonic()

    def sweep(self, now: float | None = None) -> int:
        """Delete the workspaces unused for ``keep_s`` seconds; returns how many."""
        now = time.monotonic() if now is None else now
        with self.lock:
            old = [d for d, since in self.unused_since.items() if now - since >= self.keep_s]
            for digest in old:
                del self.unused_since[digest]
                self.bytes -= self.sizes.pop(digest, 0)
        for digest in old:
            shutil.rmtree(self.path(digest), ignore_errors=True)
        return len(old)

    def close(self) -> None:
        """Delete the whole store (the worker stops; no session is open)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def _materialise(self, workspace: Workspace) -> Path:
        """Write ``workspace`` into a fresh staging directory; returns it.

        Symbolic links are written last and nothing lies under one (``Workspace`` refuses
        it), so no write here follows a link the workspace carries.
        """
        staging = self.root / f".staging-{workspace.digest[:16]}-{secrets.token_hex(4)}"
        staging.mkdir(mode=0o755)
        try:
            for entry in workspace.entries:
                target = staging / entry.path
                if entry.kind == "dir":
                    target.mkdir(mode=0o755, parents=True, exist_ok=True)
                elif entry.kind == "file":
                    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    fd = os.open(target, flags, entry.mode)
                    try:
                        view = memoryview(entry.data)
                        while view:
                            view = view[os.write(fd, view) :]
                        os.fchmod(fd, entry.mode)  # not the umask's
                    finally:
                        os.close(fd)
            for entry in workspace.entries:
                if entry.kind == "symlink":
                    target = staging / entry.path
                    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                    os.symlink(entry.data.decode("utf-8", "surrogateescape"), target)
            if self.owner is not None:
                for current, dirs, files in os.walk(staging):
                    os.chmod(current, 0o755)
                    os.lchown(current, self.owner, self.owner)
                    for name in dirs + files:
                        os.lchown(os.path.join(current, name), self.owner, self.owner)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging


def _check_digest(digest: str) -> None:
    if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise ValueError(f"workspace digest {str(digest)[:80]!r} is not a SHA-256 in hex")


def sweep_dead_owners(parent: Path) -> int:
    """Remove the store directories under ``parent`` whose owner process (on this host) is
    gone; returns how many."""
    host = socket.gethostname()
    removed = 0
    if not parent.is_dir():
        return 0
    for path in parent.iterdir():
        name, _, rest = path.name.rpartition("-")
        owner_host, _, pid = name.rpartition("-")
        if owner_host != host or not pid.isdigit() or not rest:
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
        log.info("removed the workspace store of dead worker %s", path.name)
    return removed
