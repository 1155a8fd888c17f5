"""Archives from outside (a repository's tree, an sdist, a sandboxed build's output), read with
their bounds enforced while they are read.

Every limit holds before the bytes it guards are in memory: the member count as members are met
(never after a whole listing: a tar is read as a stream, a zip's central directory is counted
record by record before :mod:`zipfile` parses it), each member's size from its header and again
from the bytes actually decompressed (headers lie), the total unpacked, and the compression ratio
(bytes out over bytes in, for the whole archive and for each large zip member): a 400 KiB zip
that unpacks to 400 MiB, a tar.gz of a million empty members, a pax header of a gigabyte of zeros
are refused after reading what proves it, not after reading all of it.

Member names are checked too (:func:`core.names.name_problem`: valid UTF-8, no control
or bidirectional characters; no absolute path, no ``..``), and a refusal names the archive, the
member and the limit.

    for member in read_archive(path, label="repository.tar.gz", limits=REPOSITORY):
        if member.kind == "file": files[member.name] = member.data

Formats: tar (plain, gzip, bzip2, xz) and zip (stored, deflate, bzip2, lzma), recognised by their
first bytes, not their file name.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from core.errors import InputError
from core.names import name_problem, printable, utf8_name

MIB = 1024**2
CHUNK = 1 << 16
# Zip's end-of-central-directory record, and the zip64 locator and record it may point at.
EOCD = struct.Struct("<4s4H2LH")
EOCD64_LOCATOR = struct.Struct("<4sLQL")
EOCD64 = struct.Struct("<4sQ2H2L4Q")
CENTRAL_RECORD = struct.Struct("<4s6H3L5H2L")
ZIP_UTF8_FLAG = 0x800


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive may hold.

    Attributes:
        members: entries of any kind (files, directories, links, headers of special files).
        file_bytes: the largest member, unpacked.
        total_bytes: all members together, unpacked.
        ratio: the largest compression ratio (unpacked bytes over packed bytes) of the whole
            archive, and of a zip member, once past ``ratio_floor_bytes`` unpacked (small
            members and archives may compress as well as they like).
        ratio_floor_bytes: see ``ratio``.
    """

    members: int
    file_bytes: int
    total_bytes: int
    ratio: float = 100.0
    ratio_floor_bytes: int = 1 * MIB


class ArchiveRefused(InputError):
    """An archive (or one of its members) over a limit, unsafe or unreadable; nothing of it
    was kept. The message names the archive, the member and the limit."""


@dataclass(frozen=True)
class Member:
    """One entry of an archive.

    Attributes:
        name: its path, ``/``-separated, checked (UTF-8, no control characters, relative, no
            ``..``); a directory's without its trailing ``/``.
        kind: ``file``, ``dir``, ``symlink`` or ``other`` (hard links, devices, FIFOs).
        data: a file's bytes (at most ``file_bytes``).
        link: a symbolic link's target, as written (never followed).
        executable: a file whose mode has an execute bit.
    """

    name: str
    kind: str
    data: bytes = b""
    link: str = ""
    executable: bool = False


class _Metered(io.RawIOBase):
    """A readable stream that counts the bytes read through it and calls ``check(count)``
    after every read (which raises to stop the reader above it)."""

    def __init__(self, inner: BinaryIO, check: Callable[[int], None] = lambda _n: None):
        super().__init__()
        self.inner, self.check, self.count = inner, check, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        size = len(data)
        buffer[:size] = data
        self.count += size
        self.check(self.count)
        return size


def _opened(source: Path | bytes) -> BinaryIO:
    return io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else open(source, "rb")


def _sniff(head: bytes) -> str:
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    return "tar"


def read_archive(source: Path | bytes, *, label: str, limits: ArchiveLimits) -> Iterator[Member]:
    """Yield the members of the archive ``source`` (a file, or its bytes), in archive order.

    Args:
        label: how messages name the archive (its file name, ``git archive of 1a2b3c``).
        limits: see :class:`ArchiveLimits`.

    Raises:
        ArchiveRefused: over a limit, a name that is not valid UTF-8 or holds a control
            character, an absolute name or one with ``..``, or an archive that cannot be read
            (each message names ``label`` and the member).
    """
    with _opened(source) as handle:
        kind = _sniff(handle.read(8))
        handle.seek(0)
        if kind == "zip":
            yield from _read_zip(handle, label, limits)
        else:
            yield from _read_tar(handle, kind, label, limits)


def _refuse(label: str, why: str, member: str | None = None) -> ArchiveRefused:
    where = f"{label}: member {printable(member)}" if member is not None else label
    return ArchiveRefused(f"archive {where} {why}; refused, nothing was kept")


def _checked_name(label: str, raw_name: str) -> str:
    problem = name_problem(raw_name)
    if problem:
        raise _refuse(label, f"has a name that {problem}", raw_name)
    path = PurePosixPath(raw_name)
    if path.is_absolute() or ".." in path.parts:
        raise _refuse(label, "leaves the archive's directory (an absolute path or '..')", raw_name)
    return "/".join(part for part in path.parts if part != ".")


class _Budget:
    """The running counts one archive's limits are checked against."""

    def __init__(self, label: str, limits: ArchiveLimits) -> None:
        self.label, self.limits = label, limits
        self.members = 0
        self.total = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.members:
            raise _refuse(self.label, f"has more than {self.limits.members} members")

    def declared(self, name: str, size: int) -> None:
        if size > self.limits.file_bytes:
            raise _refuse(
                self.label, f"is {size} bytes, over the {self.limits.file_bytes} byte limit", name
            )

    def read(self, name: str, stream: BinaryIO) -> bytes:
        """A member's bytes, counted as they come (its header's size is not trusted)."""
        chunks, size = [], 0
        while chunk := stream.read(CHUNK):
            size += len(chunk)
            if size > self.limits.file_bytes:
                raise _refuse(
                    self.label, f"unpacks past the {self.limits.file_bytes} byte limit", name
                )
            self.total += len(chunk)
            if self.total > self.limits.total_bytes:
                raise _refuse(
                    self.label, f"unpacks to more than {self.limits.total_bytes} bytes in all"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def ratio(self, unpacked: int, packed: int, member: str | None = None) -> None:
        limits = self.limits
        if unpacked > limits.ratio_floor_bytes and unpacked > limits.ratio * max(packed, 1):
            raise _refuse(
                self.label,
                f"unpacks {unpacked} bytes from {packed}: a compression ratio over "
                f"{limits.ratio:g}:1, as a decompression bomb has",
                member,
            )


def _read_tar(handle: BinaryIO, kind: str, label: str, limits: ArchiveLimits) -> Iterator[Member]:
    budget = _Budget(label, limits)
    packed = _Metered(handle)
    # Everything tar reads (headers, pax records, members' bytes, padding) counts against a cap
    # on the unpacked stream and against the ratio: a header cannot be a bomb either.
    stream_cap = limits.total_bytes + limits.members * 1536 + MIB

    def check_stream(count: int) -> None:
        if count > stream_cap:
            raise _refuse(label, f"unpacks to more than {limits.total_bytes} bytes in all")
        if kind != "tar":
            budget.ratio(count, packed.count)

    inner: BinaryIO = io.BufferedReader(packed, CHUNK)
    if kind == "gzip":
        inner = gzip.GzipFile(fileobj=inner, mode="rb")
    elif kind == "bzip2":
        inner = bz2.BZ2File(inner)
    elif kind == "xz":
        inner = lzma.LZMAFile(inner)
    unpacked = io.BufferedReader(_Metered(inner, check_stream), CHUNK)
    try:
        with tarfile.open(fileobj=unpacked, mode="r|", errors="surrogateescape") as tar:
            while (info := tar.next()) is not None:
                tar.members.clear()  # a stream is read once: keep no listing of it
                budget.member(info.name)
                name = _checked_name(label, info.name)
                if info.isdir():
                    yield Member(name, "dir")
                elif info.issym():
                    yield Member(name, "symlink", link=info.linkname)
                elif info.isfile():
                    budget.declared(info.name, info.size)
                    data = budget.read(info.name, tar.extractfile(info))
                    yield Member(name, "file", data, executable=bool(info.mode & 0o111))
                else:
                    yield Member(name, "other")
            # To the end of the stream (within the caps): a compressed stream cut short ends
            # tar's listing quietly, but not its decompressor.
            while unpacked.read(CHUNK):
                pass
    except (tarfile.TarError, EOFError, OSError, zipfile.BadZipFile, lzma.LZMAError) as exc:
        raise _refuse(label, f"cannot be read as a tar archive ({exc})") from None


def _zip_directory(handle: BinaryIO, label: str, limits: ArchiveLimits) -> None:
    """Count the central directory's records the way :mod:`zipfile` will read them (from the
    end record's position back by its size), stopping past ``limits.members``: zipfile would
    parse every record into memory before anyone could count them."""
    size = handle.seek(0, io.SEEK_END)
    tail_start = max(0, size - (EOCD.size + 65535))
    handle.seek(tail_start)
    tail = handle.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < EOCD.size:
        raise _refuse(label, "cannot be read as a zip archive (no end of central directory)")
    eocd_offset = tail_start + at
    fields = EOCD.unpack_from(tail, at)
    entries, directory_size = fields[4], fields[5]
    locator_at = at - EOCD64_LOCATOR.size
    if locator_at >= 0 and tail[locator_at : locator_at + 4] == b"PK\x06\x07":
        record_offset = EOCD64_LOCATOR.unpack_from(tail, locator_at)[2]
        handle.seek(record_offset)
        record = handle.read(EOCD64.size)
        if len(record) == EOCD64.size and record.startswith(b"PK\x06\x06"):
            zip64 = EOCD64.unpack(record)
            entries, directory_size = zip64[7], zip64[8]
            eocd_offset = record_offset
    if entries > limits.members:
        raise _refuse(label, f"has more than {limits.members} members ({entries})")
    if directory_size > limits.members * 1024 + MIB:
        raise _refuse(label, f"has a central directory of {directory_size} bytes")
    handle.seek(max(0, eocd_offset - directory_size))
    directory = handle.read(directory_size)
    offset = count = 0
    while offset + CENTRAL_RECORD.size <= len(directory):
        record = CENTRAL_RECORD.unpack_from(directory, offset)
        if record[0] != b"PK\x01\x02":
            break
        count += 1
        if count > limits.members:
            raise _refuse(label, f"has more than {limits.members} members")
        offset += CENTRAL_RECORD.size + record[10] + record[11] + record[12]


def _zip_name(info: zipfile.ZipInfo, label: str) -> str:
    """The member's name as UTF-8: flagged UTF-8 names as they are, others (which zipfile
    decodes as code page 437) when their bytes are UTF-8 anyway (most tools write UTF-8
    without the flag), else refused."""
    if info.flag_bits & ZIP_UTF8_FLAG:
        return info.filename
    raw = info.orig_filename.encode("cp437", "replace")
    name = utf8_name(raw)
    if name is None:
        shown = raw.decode("utf-8", "backslashreplace")
        raise _refuse(
            label,
            "has a name that is not valid UTF-8 (re-create the archive with UTF-8 names)",
            shown,
        )
    return name


def _read_zip(handle: BinaryIO, label: str, limits: ArchiveLimits) -> Iterator[Member]:
    budget = _Budget(label, limits)
    size = handle.seek(0, io.SEEK_END)
    try:
        _zip_directory(handle, label, limits)
        handle.seek(0)
        with zipfile.ZipFile(handle) as archive:
            for info in archive.infolist():
                raw_name = _zip_name(info, label)
                budget.member(raw_name)
                name = _checked_name(label, raw_name.rstrip("/") if info.is_dir() else raw_name)
                mode = info.external_attr >> 16
                if info.is_dir():
                    yield Member(name, "dir")
                    continue
                if mode & 0o170000 == 0o120000:
                    budget.declared(raw_name, info.file_size)
                    with archive.open(info) as stream:
                        target = budget.read(raw_name, stream)
                    yield Member(name, "symlink", link=target.decode("utf-8", "surrogateescape"))
                    continue
                if mode & 0o170000 not in (0, 0o100000):
                    yield Member(name, "other")
                    continue
                budget.declared(raw_name, info.file_size)
                budget.ratio(info.file_size, info.compress_size, raw_name)
                with archive.open(info) as stream:
                    data = budget.read(raw_name, stream)
                budget.ratio(len(data), info.compress_size, raw_name)
                budget.ratio(budget.total, size)
                yield Member(name, "file", data, executable=bool(mode & 0o111))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError,
            RuntimeError, lzma.LZMAError, struct.error) as exc:  # fmt: skip
        raise _refuse(label, f"cannot be read as a zip archive ({exc})") from None


def archive_comment(source: Path | bytes) -> str:
    """The commit ``git archive`` recorded in an archive (a tar's pax ``comment``, a zip's
    comment), or ``""``; read from the archive's first header or its end record only."""
    with _opened(source) as handle:
        kind = _sniff(handle.read(8))
        handle.seek(0)
        try:
            if kind == "zip":
                size = handle.seek(0, io.SEEK_END)
                handle.seek(max(0, size - (EOCD.size + 65535)))
                tail = handle.read()
                at = tail.rfind(b"PK\x05\x06")
                if at < 0:
                    return ""
                length = EOCD.unpack_from(tail, at)[-1]
                start = at + EOCD.size
                return tail[start : start + length].decode("ascii", "replace")
            opener = {"gzip": gzip.GzipFile, "bzip2": bz2.BZ2File, "xz": lzma.LZMAFile}
            inner = opener[kind](fileobj=handle) if kind == "gzip" else (
                opener[kind](handle) if kind in opener else handle
            )  # fmt: skip
            # The global pax header git writes comes first: read one header block and its
            # records (bounded), never the archive.
            head = inner.read(512)
            if len(head) < 512 or head[156:157] != b"g":
                return ""
            size = int(head[124:136].rstrip(b"\0 ") or b"0", 8)
            records = inner.read(min(size, 64 * 1024)).decode("utf-8", "replace")
        except (OSError, EOFError, ValueError, lzma.LZMAError, struct.error):
            return ""
    for record in records.splitlines():
        _length, _, pair = record.partition(" ")
        key, _, value = pair.partition("=")
        if key == "comment":
            return value
    return ""
