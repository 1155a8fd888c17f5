"""Source distributions built in a test: tar.gz archives of chosen members (hostile ones too)."""

from __future__ import annotations

import io
import json
import tarfile
from io import StringIO
from pathlib import Path

from django.core.management import call_command


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


def import_repo_bugs(*args) -> str:
    """``import_tasks repo-bugs ARGS``; what it printed."""
    out = StringIO()
    call_command("import_tasks", "repo-bugs", *args, stdout=out)
    return out.getvalue()


def import_one_inflection_task() -> dict:
    """One task generated from inflection 0.5.1 (a real sdist), imported; the JSON report."""
    return json.loads(
        import_repo_bugs(
            "--package",
            "inflection==0.5.1",
            "--count",
            "1",
            "--max-failing",
            "40",
            "--reference-runs",
            "2",
            "--json",
        )
    )
