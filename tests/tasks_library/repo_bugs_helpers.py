"""Source distributions built in a test: tar.gz archives of chosen members (hostile ones too)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def sdist(
    path: Path,
    files: dict[str, bytes],
    *,
    links: dict[str, str] | None = None,
    top: str | None = None,
) -> Path:
    """Write a ``.tar.gz`` at ``path`` holding ``files`` (member names as given, under ``top/``
    when ``top`` is set) and symbolic ``links`` (name -> target)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return path


PKG_INFO = b"Metadata-Version: 2.1\nName: calc\nVersion: 1.0\nLicense: MIT\n"
CALC = b'''"""A tiny calculator."""


def clamp(value, low, high):
    """Clamp value into [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def mean(values):
    return sum(values) / len(values)
'''
TESTS = b"""from calc import clamp, mean


def test_clamp_low():
    assert clamp(-5, 0, 10) == 0


def test_clamp_high():
    assert clamp(50, 0, 10) == 10


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2
"""
