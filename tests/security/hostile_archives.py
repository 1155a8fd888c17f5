"""Hostile archives for the corpus (tests/security/test_hostile_inputs_corpus.py): each builder
writes one archive under a directory and returns its path."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

MIB = 1024**2
PROJECT = {"calc/ops.py": b"def add(a, b):\n    return a + b\n", "tests/test_ops.py": b"x = 1\n"}


def tar_bytes(members: list[tarfile.TarInfo | tuple[str, bytes]], *, pax=None) -> bytes:
    """A plain tar of ``members``: ``(name, data)`` files or ready ``TarInfo`` headers."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer,
        mode="w",
        format=tarfile.PAX_FORMAT,
        encoding="utf-8",
        errors="surrogateescape",
        pax_headers=pax or {},
    ) as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def project(*extra) -> list:
    return [(f"calc-1.0/{name}", data) for name, data in PROJECT.items()] + list(extra)


def special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def zeros_zip(path: Path, size: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in PROJECT.items():
            archive.writestr(f"calc-1.0/{name}", data)
        with archive.open("calc-1.0/data/zeros.bin", "w") as handle:
            for _ in range(size // MIB):
                handle.write(b"\0" * MIB)
    return path


def raw_member(name: str, data: bytes) -> bytes:
    """One tar member as bytes: its header, its data padded to whole blocks."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + b"\0" * (-len(data) % 512)


def zeros_tar(path: Path, size: int, compress: Callable[[bytes], bytes]) -> Path:
    head = b"".join(raw_member(name, data) for name, data in project())
    info = tarfile.TarInfo("calc-1.0/data/zeros.bin")
    info.size = size
    body = info.tobuf(format=tarfile.USTAR_FORMAT) + b"\0" * size + b"\0" * 1024
    path.write_bytes(compress(head + body))
    return path


def pax_bomb(path: Path) -> Path:
    """A tar.gz whose first header is a pax record of 40 MiB (headers are read whole)."""
    data = tar_bytes(project(), pax={"comment": "a" * (40 * MIB)})
    path.write_bytes(gzip.compress(data, compresslevel=1))
    return path


def zip_listing(path: Path, count: int, *, claimed: int | None = None, zip64: int = 0) -> Path:
    """A zip whose central directory lists ``count`` empty members; its end record claims
    ``claimed`` entries (default ``count``), or a zip64 end record claims ``zip64``."""
    name = b"calc/a.py"
    crc = zlib.crc32(b"")
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, 0, 0, len(name), 0)
    record = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, 0, 0, len(name), 0, 0, 0, 0, 0, 0
    ) + name  # fmt: skip
    directory = record * count
    start = len(local) + len(name)
    claimed = count if claimed is None else claimed
    tail = b""
    if zip64:
        record64_at = start + len(directory)
        tail = struct.pack(
            "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, zip64, zip64, len(directory), start
        ) + struct.pack("<4sLQL", b"PK\x06\x07", 0, record64_at, 1)  # fmt: skip
        claimed = 0xFFFF
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, min(claimed, 0xFFFF), min(claimed, 0xFFFF),
        len(directory), start, 0,
    )  # fmt: skip
    path.write_bytes(local + name + directory + tail + end)
    return path


def lying_zip(path: Path) -> Path:
    """A member whose headers say 10 bytes, holding 5 MiB of deflated zeros."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in PROJECT.items():
            archive.writestr(f"calc-1.0/{name}", data)
        archive.writestr("calc-1.0/data/lie.bin", b"\0" * (5 * MIB))
    data = bytearray(buffer.getvalue())
    size = (5 * MIB).to_bytes(4, "little")
    small = (10).to_bytes(4, "little")
    data = bytes(data).replace(size, small)  # uncompressed size in the local and central headers
    path.write_bytes(data)
    return path


def encrypted_zip(path: Path) -> Path:
    """A zip whose members say they are encrypted (flag bit 0)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in PROJECT.items():
            archive.writestr(f"calc-1.0/{name}", data)
    data = bytearray(buffer.getvalue())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at >= 0:
            data[at + flag_at] |= 1
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    return path


def zip_with_raw_name(path: Path, raw: bytes) -> Path:
    """A zip holding the project and one member whose name is ``raw`` bytes without the UTF-8
    flag (what a legacy tool writes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in PROJECT.items():
            archive.writestr(f"calc-1.0/{name}", data)
        archive.writestr("calc-1.0/PLACEHOLDER", b"x")
    path.write_bytes(buffer.getvalue().replace(b"PLACEHOLDER", raw.ljust(11, b"_")[:11]))
    return path


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def tar_with(*extra) -> Callable[[Path], Path]:
    """A builder of ``calc.tar``: the project plus ``extra`` members."""
    return lambda d: write(d / "calc.tar", tar_bytes(project(*extra)))


ARCHIVES: dict[str, tuple[Callable[[Path], Path], str | None]] = {
    # name: (builder(directory) -> archive, the refusal's words, or None: it imports)
    "zip bomb: 400 MiB in one member": (
        lambda d: zeros_zip(d / "calc.zip", 400 * MIB),
        "over the 33554432 byte limit",
    ),
    "zip ratio bomb: 30 MiB of zeros": (
        lambda d: zeros_zip(d / "calc.zip", 30 * MIB),
        "compression ratio over 100:1",
    ),
    "tar.gz ratio bomb": (
        lambda d: zeros_tar(d / "calc.tar.gz", 30 * MIB, gzip.compress),
        "compression ratio over 100:1",
    ),
    "tar.bz2 ratio bomb": (
        lambda d: zeros_tar(d / "calc.tar", 30 * MIB, bz2.compress),
        "compression ratio over 100:1",
    ),
    "tar.xz ratio bomb": (
        lambda d: zeros_tar(d / "calc.tar", 30 * MIB, lzma.compress),
        "compression ratio over 100:1",
    ),
    "a pax header of 40 MiB": (lambda d: pax_bomb(d / "calc.tar.gz"), "compression ratio"),
    "a plain tar member over the file limit": (
        lambda d: zeros_tar(d / "calc.tar", 33 * MIB, lambda b: b),
        "over the 33554432 byte limit",
    ),
    "a zip member whose headers understate its size": (
        lambda d: lying_zip(d / "calc.zip"),
        "cannot be read",
    ),
    "a zip listing 60,000 members": (
        lambda d: zip_listing(d / "calc.zip", 60_000),
        "more than 50000 members",
    ),
    "a zip whose end record claims 1 member of 60,000": (
        lambda d: zip_listing(d / "calc.zip", 60_000, claimed=1),
        "more than 50000 members",
    ),
    "a zip64 end record claiming 2**40 members": (
        lambda d: zip_listing(d / "calc.zip", 3, zip64=1 << 40),
        "more than 50000 members",
    ),
    "an absolute member name": (
        tar_with(("/etc/cron.d/evil", b"x")),
        "leaves the archive's directory",
    ),
    "a member climbing out with ..": (
        tar_with(("../../evil.py", b"x")),
        "leaves the archive's directory",
    ),
    "a member climbing out from inside": (
        tar_with(("calc-1.0/a/../../../x", b"x")),
        "leaves the archive's directory",
    ),
    "a symbolic link to /etc/shadow (kept out)": (
        tar_with(special("calc-1.0/shadow", tarfile.SYMTYPE, "/etc/shadow")),
        None,
    ),
    "a hard link to /etc/shadow (kept out)": (
        tar_with(special("calc-1.0/shadow", tarfile.LNKTYPE, "/etc/shadow")),
        None,
    ),
    "a FIFO and a device (kept out)": (
        tar_with(
            special("calc-1.0/fifo", tarfile.FIFOTYPE), special("calc-1.0/mem", tarfile.CHRTYPE)
        ),
        None,
    ),
    "a name that is not UTF-8": (
        tar_with(("calc-1.0/bad\udcff.py", b"x")),
        "is not valid UTF-8",
    ),
    "a legacy zip name that is not UTF-8": (
        lambda d: zip_with_raw_name(d / "calc.zip", b"caf\x82.py"),
        "is not valid UTF-8",
    ),
    "a name with a newline": (
        tar_with(("calc-1.0/a\nb.py", b"x")),
        "control character U+000A",
    ),
    "a name with an escape sequence": (
        tar_with(("calc-1.0/\x1b[2J.py", b"x")),
        "control character U+001B",
    ),
    "a name with DEL": (
        tar_with(("calc-1.0/a\x7f.py", b"x")),
        "control character U+007F",
    ),
    "a name with a bidirectional override": (
        tar_with(("calc-1.0/a\u202eyp.txt", b"x")),
        "bidirectional control U+202E",
    ),
    "a truncated tar.gz": (
        lambda d: write(d / "calc.tar.gz", gzip.compress(tar_bytes(project()))[:-40]),
        "cannot be read",
    ),
    "random bytes named .tar.gz": (
        lambda d: write(d / "calc.tar.gz", bytes(range(256)) * 40),
        "cannot be read",
    ),
    "an encrypted zip": (lambda d: encrypted_zip(d / "calc.zip"), "cannot be read"),
    "a .git directory with hooks inside (left out)": (
        lambda d: write(
            d / "calc.tar",
            tar_bytes(project(("calc-1.0/.git/hooks/post-checkout", b"#!/bin/sh\ntouch /tmp/x\n"))),
        ),
        None,
    ),
}
