"""A session's starting workspace: files, directories and symbolic links, content-addressed.

A :class:`Workspace` is built from a mapping of files or from a directory and packed into
one blob: ``MAGIC``, an 8-byte big-endian header length, a JSON header (``[[path, kind,
mode, size], ...]``, sorted by path) and every entry's bytes in header order (a file's
content, a link's target). Its digest is the SHA-256 of the blob, so two identical file
sets have one digest: a group of G sessions of one task shares one materialised copy,
and the blob crosses Redis once (``sandboxes/sessions/client.py``).

Paths are relative, ``/``-separated, without ``.``, ``..`` or empty components; a file
mode keeps only its executable bit (0644 or 0755); nothing may lie under a symbolic link
(materialising the entry below it would write through the link).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"crucible-workspace-1\n"
MAX_ENTRIES = 100_000
MAX_BYTES = 1024**3
MAX_PATH_BYTES = 4096
KINDS = ("file", "dir", "symlink")
PREFIX_BYTES = len(MAGIC) + 8  # the magic and the header's length


@dataclass(frozen=True)
class IndexEntry:
    """One entry of a packed workspace as its header describes it: ``offset`` is where its
    ``size`` bytes start in the blob."""

    path: str
    kind: str
    mode: int
    size: int
    offset: int


@dataclass(frozen=True)
class Entry:
    """One workspace entry: ``kind`` ``file`` (``data`` its content, ``mode`` 0o644 or
    0o755), ``dir`` (mode 0o755) or ``symlink`` (``data`` its target, UTF-8)."""

    path: str
    kind: str
    mode: int
    data: bytes = b""


def check_path(path: str) -> str:
    """``path`` if it is a valid workspace path (see the module).

    Raises:
        ValueError: naming the path and what is wrong with it.
    """
    if not isinstance(path, str) or not path:
        raise ValueError(f"workspace path {path!r} must be a non-empty string")
    if "\0" in path or len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise ValueError(f"workspace path {path[:100]!r} has a NUL character or is too long")
    if path.startswith("/"):
        raise ValueError(f"workspace path {path!r} must be relative")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"workspace path {path!r} has an empty, '.' or '..' component")
        if len(part.encode("utf-8", "surrogateescape")) > 255:
            raise ValueError(f"workspace path {path!r} has a component over 255 bytes")
    return path


class Workspace:
    """A validated, packed set of entries (see the module).

    Attributes:
        entries: the entries, sorted by path.
        blob: the packed form (bytes).
        digest: SHA-256 of ``blob``, hex.
        size_bytes: bytes of file content and link targets.
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        self.entries = tuple(sorted(entries, key=lambda e: e.path))
        _validate(self.entries)
        self.blob = _pack(self.entries)
        self.digest = hashlib.sha256(self.blob).hexdigest()
        self.size_bytes = sum(len(e.data) for e in self.entries)

    @classmethod
    def from_files(
        cls, files: Mapping[str, str | bytes], *, executable: Iterable[str] = ()
    ) -> Workspace:
        """A workspace of ``files`` (``{path: text or bytes}``; text is written as UTF-8);
        the paths in ``executable`` get mode 0755.

        Raises:
            ValueError: a bad path or value, naming it.
        """
        runnable = set(executable)
        entries = []
        for path, content in files.items():
            if isinstance(content, str):
                content = content.encode("utf-8")
            if not isinstance(content, bytes):
                raise ValueError(f"workspace file {path!r} must be str or bytes")
            mode = 0o755 if path in runnable else 0o644
            entries.append(Entry(check_path(path), "file", mode, content))
        unknown = runnable - set(files)
        if unknown:
            raise ValueError(f"executable paths that are not files: {sorted(unknown)}")
        return cls(entries)

    @classmethod
    def from_directory(cls, root: str | Path) -> Workspace:
        """A workspace of everything under ``root``: files, directories (empty ones too) and
        symbolic links (kept as links, never followed).

        Raises:
            ValueError: ``root`` is not a directory, or holds a FIFO, socket or device
                (named), or is over the size or entry limits.
        """
        root = Path(root)
        if not root.is_dir():
            raise ValueError(f"workspace directory {str(root)!r} is not a directory")
        entries = []
        for current, dirs, files in os.walk(root, followlinks=False):
            base = Path(current)
            for name in sorted(dirs + files):
                full = base / name
                rel = full.relative_to(root).as_posix()
                info = full.lstat()
                if stat.S_ISLNK(info.st_mode):
                    target = os.readlink(full).encode("utf-8", "surrogateescape")
                    entries.append(Entry(rel, "symlink", 0o777, target))
                elif stat.S_ISDIR(info.st_mode):
                    entries.append(Entry(rel, "dir", 0o755))
                elif stat.S_ISREG(info.st_mode):
                    mode = 0o755 if info.st_mode & 0o111 else 0o644
                    entries.append(Entry(rel, "file", mode, full.read_bytes()))
                else:
                    raise ValueError(f"{str(full)!r} is not a file, directory or link")
                if len(entries) > MAX_ENTRIES:
                    raise ValueError(f"{str(root)!r} has more than {MAX_ENTRIES} entries")
        return cls(entries)

    @staticmethod
    def header_length(prefix: bytes) -> int:
        """The length of a blob's JSON header, from its first :data:`PREFIX_BYTES` bytes.

        Raises:
            ValueError: not a workspace blob.
        """
        if not prefix.startswith(MAGIC) or len(prefix) < PREFIX_BYTES:
            raise ValueError("not a workspace blob")
        return int.from_bytes(prefix[len(MAGIC) : PREFIX_BYTES], "big")

    @staticmethod
    def index(header: bytes) -> list[IndexEntry]:
        """Every entry of a blob (path, kind, mode, size, and the offset of its bytes in the
        blob) from its header alone: a caller that wants one file reads that file's bytes, not
        the workspace.

        Raises:
            ValueError: the header is not a workspace blob's.
        """
        try:
            rows = json.loads(header)
        except ValueError as exc:
            raise ValueError(f"workspace blob header: {exc}") from exc
        offset = PREFIX_BYTES + len(header)
        entries = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 4 and isinstance(row[3], int)):
                raise ValueError("workspace blob header rows are [path, kind, mode, size]")
            entries.append(IndexEntry(row[0], row[1], row[2], row[3], offset))
            offset += row[3]
        return entries

    @classmethod
    def from_blob(cls, blob: bytes) -> Workspace:
        """The workspace a blob packs (the worker's side).

        Raises:
            ValueError: not a workspace blob, or an invalid one.
        """
        if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 8:
            raise ValueError("not a workspace blob")
        start = len(MAGIC) + 8
        size = int.from_bytes(blob[len(MAGIC) : start], "big")
        try:
            header = json.loads(blob[start : start + size])
        except ValueError as exc:
            raise ValueError(f"workspace blob header: {exc}") from exc
        offset = start + size
        entries = []
        for row in header:
            if not (isinstance(row, list) and len(row) == 4):
                raise ValueError("workspace blob header rows are [path, kind, mode, size]")
            path, kind, mode, length = row
            if not isinstance(length, int) or length < 0 or offset + length > len(blob):
                raise ValueError(f"workspace blob entry {path!r} runs past its end")
            entries.append(Entry(path, kind, mode, blob[offset : offset + length]))
            offset += length
        if offset != len(blob):
            raise ValueError("workspace blob has trailing bytes")
        return cls(entries)

    def files(self) -> dict[str, bytes]:
        """``{path: content}`` of the regular files."""
        return {e.path: e.data for e in self.entries if e.kind == "file"}

    def executable(self) -> set[str]:
        """The paths of the files with mode 0755."""
        return {e.path for e in self.entries if e.kind == "file" and e.mode & 0o111}


def _validate(entries: tuple[Entry, ...]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise ValueError(f"a workspace has at most {MAX_ENTRIES} entries, not {len(entries)}")
    total = 0
    kinds: dict[str, str] = {}
    for entry in entries:
        check_path(entry.path)
        if entry.kind not in KINDS:
            raise ValueError(f"workspace entry {entry.path!r} has unknown kind {entry.kind!r}")
        if entry.path in kinds:
            raise ValueError(f"workspace path {entry.path!r} appears twice")
        if entry.kind == "file" and entry.mode not in (0o644, 0o755):
            raise ValueError(f"workspace file {entry.path!r} has mode {entry.mode:o}, not 644/755")
        if entry.kind == "dir" and (entry.mode != 0o755 or entry.data):
            raise ValueError(f"workspace directory {entry.path!r} must be mode 755 and empty")
        if entry.kind == "symlink" and not entry.data:
            raise ValueError(f"workspace link {entry.path!r} has no target")
        kinds[entry.path] = entry.kind
        total += len(entry.data)
    if total > MAX_BYTES:
        raise ValueError(f"a workspace holds at most {MAX_BYTES} bytes, not {total}")
    for entry in entries:  # every parent is a directory (or implied), never a file or a link
        parent = entry.path.rpartition("/")[0]
        while parent:
            if kinds.get(parent, "dir") != "dir":
                raise ValueError(
                    f"workspace path {entry.path!r} lies under {parent!r}, a {kinds[parent]}"
                )
            parent = parent.rpartition("/")[0]


def _pack(entries: tuple[Entry, ...]) -> bytes:
    header = json.dumps(
        [[e.path, e.kind, e.mode, len(e.data)] for e in entries], separators=(",", ":")
    ).encode()
    return b"".join([MAGIC, len(header).to_bytes(8, "big"), header, *(e.data for e in entries)])
