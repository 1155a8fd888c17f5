"""The content-addressed environment store: ``build hash -> read-only directory``.

Layout under the store's root (``CRUCIBLE_ENVIRONMENT_STORE``, default ``VAR/environments``)::

    <hash>/                 a published environment (read-only: files 0444/0555, dirs 0555)
        tree/               what sandboxes mount (a Python ``site-packages``, a root filesystem)
        manifest.json       {"files": {relative path: "sha256:..." | "link:target" | "dir"}}
        build.json          {"spec", "seconds", "size_bytes", "files", "resolved", "log"}
    .building/<hash>-<rand>/ a build in progress (never mounted; removed when it fails)
    .locks/<hash>.lock      fcntl lock: one builder per hash across processes
    .failed/<hash>.json     the last failed build's error and log (kept for the console)

A build runs under the hash's lock into ``.building/``, writes the manifest and the build
record, is made read-only, then is published by one ``rename(2)`` to ``<hash>``: a reader
sees no directory or a whole one, never a half-built one. A second :meth:`ensure` of the same
hash finds the directory and returns at once (a cache hit). :meth:`verify` re-hashes every
file against the manifest (a worker does it once per environment, when it first mounts it):
the same environment version gives the same bytes on every worker, or the worker refuses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"
BUILD_RECORD = "build.json"
TREE = "tree"
HASH_CHUNK = 1 << 20


class EnvironmentBuildError(RuntimeError):
    """A build failed; nothing was published.

    Attributes:
        kind: ``missing_package``, ``unpinned``, ``conflict``, ``out_of_disk``, ``timeout``,
            ``runtime_unavailable``, ``bad_hash`` or ``failed`` (anything else).
        package: the requirement at fault, when one is.
        log: the builder's output (pip's, mmdebstrap's), for the build page.
    """

    def __init__(self, message: str, *, kind: str = "failed", package: str = "", log: str = ""):
        super().__init__(message)
        self.kind, self.package, self.log = kind, package, log


class EnvironmentCorrupt(RuntimeError):
    """A published environment's files no longer match its manifest (or it has none)."""


@dataclass(frozen=True)
class Built:
    """A published environment.

    Attributes:
        hash: its build hash (the directory's name).
        path: the directory; ``path / "tree"`` is what sandboxes mount.
        record: ``build.json`` (spec, seconds, size_bytes, files, resolved, log).
        cache_hit: True when this call found it already built.
    """

    hash: str
    path: Path
    record: dict
    cache_hit: bool

    @property
    def tree(self) -> Path:
        return self.path / TREE

    @property
    def published_at(self) -> float:
        """When the build was published (its build record's mtime, seconds since the epoch): a
        cache hit's answer is the original build's time, not the check's."""
        return (self.path / BUILD_RECORD).stat().st_mtime


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def manifest_of(tree: Path) -> dict[str, str]:
    """Every entry under ``tree``: regular files by content hash, symlinks by target,
    directories as ``dir``; device nodes, fifos and sockets are left out (a root filesystem's
    ``/dev`` is the sandbox's own, never the store's)."""
    entries: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            full = base / name
            rel = str(full.relative_to(tree))
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                entries[rel] = "link:" + os.readlink(full)
            elif stat.S_ISDIR(mode):
                entries[rel] = "dir"
            elif stat.S_ISREG(mode):
                entries[rel] = file_digest(full)
    return entries


def manifest_digest(built: Built) -> str:
    """``sha256:<hex>`` of a published environment's manifest: equal digests, equal files."""
    return file_digest(built.path / MANIFEST)


def tree_size(tree: Path) -> int:
    """Bytes of the regular files under ``tree`` (symlinks not followed)."""
    total = 0
    for dirpath, _dirs, filenames in os.walk(tree):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def _make_read_only(top: Path) -> None:
    """Every file and directory under ``top`` (and ``top``) loses its write, setuid and setgid
    bits and keeps the rest: what its builder made unreadable to others (a root filesystem's
    ``/etc/shadow``, 0640) stays unreadable to the sandbox user."""
    for dirpath, dirnames, filenames in os.walk(top, topdown=False):
        for name in filenames + dirnames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                continue
            os.chmod(full, stat.S_IMODE(st.st_mode) & ~0o6222)
    os.chmod(top, 0o555)


def _make_writable(top: Path) -> None:
    """Give the owner write access again (to delete a build or a collected environment)."""
    for dirpath, dirnames, _files in os.walk(top):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, os.lstat(full).st_mode | 0o700)
    if top.exists() and not top.is_symlink():
        os.chmod(top, os.lstat(top).st_mode | 0o700)


def remove_tree(top: Path) -> None:
    """Delete a (possibly read-only) directory tree."""
    if not top.exists():
        return
    _make_writable(top)
    shutil.rmtree(top, ignore_errors=True)


class EnvironmentStore:
    """The store under ``root`` (see the module). Thread- and process-safe."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        for sub in (".building", ".locks", ".failed"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # Readable by the sandbox user: the published trees are bound into sandboxes.
        os.chmod(self.root, 0o755)
        self._verified: set[str] = set()
        self._verify_lock = threading.Lock()

    def path(self, build_hash: str) -> Path:
        if not build_hash or "/" in build_hash or build_hash.startswith("."):
            raise ValueError(f"not a build hash: {build_hash!r}")
        return self.root / build_hash

    def get(self, build_hash: str) -> Built | None:
        """The published environment, or None when it is not built here."""
        path = self.path(build_hash)
        try:
            record = json.loads((path / BUILD_RECORD).read_text())
        except (OSError, ValueError):
            return None
        return Built(build_hash, path, record, cache_hit=True)

    @contextlib.contextmanager
    def _locked(self, build_hash: str) -> Iterator[None]:
        with open(self.root / ".locks" / f"{build_hash}.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def ensure(
        self,
        build_hash: str,
        spec: dict,
        build: Callable[[Path], dict],
        *,
        progress: Callable[[str], None] | None = None,
    ) -> Built:
        """The environment ``build_hash``, built first if it is not in the store.

        Args:
            spec: what it is built from (kept in ``build.json``).
            build: ``build(tree) -> {"resolved": [...], "log": str}``: fills the empty
                directory ``tree``; raises :class:`EnvironmentBuildError` on failure.
            progress: called with one line per step (for a build page's live log).

        Returns:
            the published environment (``cache_hit`` True when no build ran).

        Raises:
            EnvironmentBuildError: the build failed; nothing was published, and the error
                is kept in ``.failed/<hash>.json``.
        """
        found = self.get(build_hash)
        if found is not None:
            return found
        with self._locked(build_hash):
            found = self.get(build_hash)  # another process built it while we waited
            if found is not None:
                return found
            work = self.root / ".building" / f"{build_hash}-{secrets.token_hex(4)}"
            (work / TREE).mkdir(parents=True)
            started = time.monotonic()
            try:
                outcome = build(work / TREE)
                if progress:
                    progress("hashing the files for the manifest")
                manifest = manifest_of(work / TREE)
                record = {
                    "hash": build_hash,
                    "spec": spec,
                    "seconds": round(time.monotonic() - started, 3),
                    "size_bytes": tree_size(work / TREE),
                    "files": sum(1 for v in manifest.values() if v.startswith("sha256:")),
                    "resolved": outcome.get("resolved", []),
                    "log": outcome.get("log", ""),
                }
                (work / MANIFEST).write_text(json.dumps({"files": manifest}, sort_keys=True))
                (work / BUILD_RECORD).write_text(json.dumps(record, sort_keys=True, indent=1))
                _make_read_only(work)
                os.rename(work, self.path(build_hash))
            except EnvironmentBuildError as exc:
                self._fail(build_hash, work, exc)
                raise
            except OSError as exc:
                kind = "out_of_disk" if exc.errno == 28 else "failed"
                error = EnvironmentBuildError(
                    f"building environment {build_hash[:12]} failed: {exc}"
                    + (": free disk space under the store" if kind == "out_of_disk" else ""),
                    kind=kind,
                )
                self._fail(build_hash, work, error)
                raise error from exc
            (self.root / ".failed" / f"{build_hash}.json").unlink(missing_ok=True)
            with self._verify_lock:
                self._verified.add(build_hash)  # hashed a moment ago by this process
            return Built(build_hash, self.path(build_hash), record, cache_hit=False)

    def _fail(self, build_hash: str, work: Path, exc: EnvironmentBuildError) -> None:
        remove_tree(work)
        (self.root / ".failed" / f"{build_hash}.json").write_text(
            json.dumps(
                {"error": str(exc), "kind": exc.kind, "package": exc.package, "log": exc.log}
            )
        )

    def last_failure(self, build_hash: str) -> dict | None:
        """The last failed build of ``build_hash`` (``error``, ``kind``, ``package``, ``log``)."""
        try:
            return json.loads((self.root / ".failed" / f"{build_hash}.json").read_text())
        except (OSError, ValueError):
            return None

    def verify(self, build_hash: str) -> Built:
        """The published environment, its every file checked against its manifest (once per
        store object, i.e. once per worker process: the first mount).

        Raises:
            EnvironmentCorrupt: not built here, no manifest, or a file differs (named).
        """
        built = self.get(build_hash)
        if built is None:
            raise EnvironmentCorrupt(
                f"environment {build_hash[:12]} is not built in {self.root}; build it first "
                "(python manage.py build_environment)"
            )
        with self._verify_lock:
            if build_hash in self._verified:
                return built
        try:
            expected = json.loads((built.path / MANIFEST).read_text())["files"]
        except (OSError, ValueError, KeyError) as exc:
            raise EnvironmentCorrupt(f"environment {build_hash[:12]} has no manifest") from exc
        actual = manifest_of(built.tree)
        if actual != expected:
            changed = sorted(
                k for k in set(actual) | set(expected) if actual.get(k) != expected.get(k)
            )
            raise EnvironmentCorrupt(
                f"environment {build_hash[:12]} differs from its manifest in {len(changed)} "
                f"file(s), first {changed[0]!r}; remove {built.path} to rebuild it"
            )
        with self._verify_lock:
            self._verified.add(build_hash)
        return built

    def published(self) -> list[str]:
        """The build hashes published here."""
        return sorted(
            p.name for p in self.root.iterdir() if not p.name.startswith(".") and p.is_dir()
        )

    def remove_abandoned_builds(self) -> list[str]:
        """Delete the temp directories of builds whose builder died (no one holds their lock);
        the names removed."""
        removed = []
        for work in (self.root / ".building").iterdir():
            build_hash = work.name.rsplit("-", 1)[0]
            with open(self.root / ".locks" / f"{build_hash}.lock", "a+") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live build
                try:
                    remove_tree(work)
                    removed.append(work.name)
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        return removed

    def remove(self, build_hash: str) -> None:
        """Delete a published environment (under its lock: never one being built)."""
        with self._locked(build_hash):
            remove_tree(self.path(build_hash))
        with self._verify_lock:
            self._verified.discard(build_hash)
