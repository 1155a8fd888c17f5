"""/srv/app-logs holds exactly the current logs, the legal-hold files and the non-log files, all
unchanged; every other rotated log is gone."""

import hashlib
import json
import os
from pathlib import Path

ROOT = Path("/srv/app-logs")
MANIFEST = json.loads(Path("/tests/manifest.json").read_text())


def files():
    out = set()
    for dirpath, _dirs, names in os.walk(ROOT):
        for name in names:
            out.add(os.path.relpath(os.path.join(dirpath, name), ROOT))
    return out


def test_keep_list_untouched():
    assert Path("/app/cleanup/KEEP").read_bytes() == Path("/tests/KEEP").read_bytes()


def test_rotated_logs_deleted():
    present = files()
    left = sorted(m["path"] for m in MANIFEST if m["class"] == "rotated" and m["path"] in present)
    assert not left, f"rotated logs not deleted: {left}"


def test_everything_else_kept_unchanged():
    for m in MANIFEST:
        if m["class"] == "rotated":
            continue
        path = ROOT / m["path"]
        assert path.is_file() and not path.is_symlink(), f"{m['path']} ({m['class']}) is gone"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == m["sha256"], f"{m['path']} changed"


def test_nothing_added():
    expected = {m["path"] for m in MANIFEST if m["class"] != "rotated"}
    assert files() == expected


def test_under_budget():
    total = sum((ROOT / p).stat().st_size for p in files())
    assert total <= 400_000
