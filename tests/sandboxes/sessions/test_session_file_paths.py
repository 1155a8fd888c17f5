"""The session's file operations (``harness/session_files.py``) on real directories of this host:
paths stay beneath the workspace, with ``openat2`` and with the component walk that replaces it
where the kernel lacks it; the diff and the changes say what changed against the start."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from sandboxes.harness import session_files as F


@pytest.fixture
def tree(tmp_path):
    """A start (``lower``) and a workspace copied from it (``work``), as descriptors."""
    lower, work = tmp_path / "lower", tmp_path / "work"
    (lower / "pkg").mkdir(parents=True)
    (lower / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (lower / "keep.txt").write_text("same\n")
    (lower / "gone.txt").write_text("bye\n")
    (lower / "blob.bin").write_bytes(b"\x00\x01")
    shutil.copytree(lower, work, symlinks=True)
    (tmp_path / "outside.txt").write_text("host secret\n")
    fds = {name: os.open(tmp_path / name, os.O_PATH | os.O_DIRECTORY) for name in ("lower", "work")}
    yield tmp_path, fds["work"], fds["lower"]
    for fd in fds.values():
        os.close(fd)


@pytest.fixture(params=["openat2", "component-walk"])
def resolver(request, monkeypatch):
    if request.param == "component-walk":  # as on a kernel without openat2 (ENOSYS)
        monkeypatch.setattr(F, "_openat2_missing", [True])
    return request.param


def test_escapes_are_refused(tree, resolver):
    root, work, _lower = tree
    os.symlink(str(root / "outside.txt"), root / "work" / "abs-link")
    os.symlink("../outside.txt", root / "work" / "rel-link")
    os.symlink("/proc/self/root/etc/passwd", root / "work" / "magic")
    for path in ("../outside.txt", "abs-link", "rel-link", "magic", "pkg/../../outside.txt"):
        with pytest.raises(F.FileOpError) as refused:
            F.read_file(work, {"path": path})
        assert refused.value.kind == "outside", path
    for path in ("/etc/passwd", "/workspace/../etc/passwd"):
        with pytest.raises(F.FileOpError):
            F.read_file(work, {"path": path})
    with pytest.raises(F.FileOpError) as written:
        F.write_file(work, {"path": "abs-link"}, b"pwned")
    assert written.value.kind == "outside"
    assert (root / "outside.txt").read_text() == "host secret\n"


def test_paths_inside_are_read(tree, resolver):
    root, work, _lower = tree
    read = F.read_file(work, {"path": "/workspace/pkg/mod.py"})
    assert F.base64.b64decode(read["data"]) == b"VALUE = 1\n" and not read["truncated"]
    if resolver == "openat2":  # a link that stays inside is followed; the walk follows none
        os.symlink("pkg/mod.py", root / "work" / "inner-link")
        assert F.read_file(work, {"path": "inner-link"})["size"] == len("VALUE = 1\n")
    with pytest.raises(F.FileOpError) as missing:
        F.read_file(work, {"path": "nope"})
    assert missing.value.kind == "not_found"


def test_a_fifo_is_refused_without_waiting(tree):
    root, work, _lower = tree
    os.mkfifo(root / "work" / "pipe")
    outcome = []
    reader = threading.Thread(
        target=lambda: outcome.append(F.run_file_op("read", {"path": "pipe"}, b"", work, work)),
        daemon=True,
    )
    reader.start()
    reader.join(timeout=5)
    assert outcome == [{"error": {"kind": "not_a_file", "detail": "'pipe' is not a regular file"}}]


def test_write_makes_parents_and_keeps_or_sets_the_mode(tree):
    root, work, _lower = tree
    assert F.write_file(work, {"path": "a/b/c.txt"}, b"deep") == {"path": "a/b/c.txt", "size": 4}
    assert (root / "work" / "a" / "b" / "c.txt").read_bytes() == b"deep"
    F.write_file(work, {"path": "run.sh", "executable": True}, b"#!/bin/sh\n")
    assert os.stat(root / "work" / "run.sh").st_mode & 0o777 == 0o755
    F.write_file(work, {"path": "run.sh"}, b"#!/bin/sh\necho\n")  # None keeps it
    assert os.stat(root / "work" / "run.sh").st_mode & 0o777 == 0o755
    with pytest.raises(F.FileOpError) as refused:
        F.write_file(work, {"path": "pkg"}, b"x")
    assert refused.value.kind == "not_a_file"
    with pytest.raises(F.FileOpError) as no_parents:
        F.write_file(work, {"path": "x/y.txt", "parents": False}, b"x")
    assert no_parents.value.kind == "not_found"


def test_diff_and_changes(tree):
    root, work, lower = tree
    (root / "work" / "pkg" / "mod.py").write_text("VALUE = 2\n")
    (root / "work" / "gone.txt").unlink()
    (root / "work" / "new.txt").write_text("fresh")
    (root / "work" / "blob.bin").write_bytes(b"\x00\x02")
    os.symlink("pkg/mod.py", root / "work" / "link")
    os.utime(root / "work" / "keep.txt")  # touched, same content: no change
    answer = F.diff(work, lower, {})
    assert [(c["path"], c["change"]) for c in answer["changes"]] == [
        ("blob.bin", "modified"),
        ("gone.txt", "deleted"),
        ("link", "added"),
        ("new.txt", "added"),
        ("pkg/mod.py", "modified"),
    ]
    text = answer["diff"]
    assert "Binary files a/blob.bin and b/blob.bin differ\n" in text
    assert "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in text
    assert "+symlink -> pkg/mod.py\n" in text
    assert "+fresh\n\\ No newline at end of file\n" in text
    assert "-VALUE = 1\n+VALUE = 2\n" in text
    assert "keep.txt" not in text
    changed = F.changes(work, lower, {})
    assert set(changed["files"]) == {"blob.bin", "new.txt", "pkg/mod.py"}
    assert changed["symlinks"] == {"link": "pkg/mod.py"} and changed["deleted"] == ["gone.txt"]
    with pytest.raises(F.FileOpError) as large:
        F.changes(work, lower, {"max_bytes": 5})
    assert large.value.kind == "too_large"
    assert F.diff(work, lower, {"max_bytes": 10})["truncated"] is True


def test_a_type_change_is_a_delete_and_an_add(tree):
    root, work, lower = tree
    (root / "work" / "keep.txt").unlink()
    (root / "work" / "keep.txt").mkdir()
    (root / "work" / "keep.txt" / "inner").write_text("x")
    changes = [(c["path"], c["change"]) for c in F.diff(work, lower, {})["changes"]]
    assert changes == [("keep.txt", "deleted"), ("keep.txt/inner", "added")]


def test_clean_path():
    assert F.clean_path("/workspace/") == "."
    assert F.clean_path("a/b/") == "a/b"
    for bad in (None, "a\0b", "/etc"):
        with pytest.raises(F.FileOpError):
            F.clean_path(bad)
    with pytest.raises(F.FileOpError):
        F.clean_path(".", allow_root=False)
