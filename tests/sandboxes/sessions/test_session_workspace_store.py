"""A session's starting workspace: packed and content-addressed (one digest per file set), and
materialised once per worker into its store, owned by the sandbox user, links never followed."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from sandboxes.process import NOBODY
from sandboxes.sessions.store import WorkspaceStore, sweep_dead_owners
from sandboxes.sessions.workspace import Entry, Workspace


def test_the_digest_is_the_content():
    one = Workspace.from_files({"a.py": "x", "b/c.txt": b"y"})
    two = Workspace.from_files({"b/c.txt": "y", "a.py": b"x"})
    assert one.digest == two.digest and one.blob == two.blob
    assert Workspace.from_files({"a.py": "x!", "b/c.txt": "y"}).digest != one.digest
    assert Workspace.from_files({"a.py": "x", "b/c.txt": "y"}, executable=["a.py"]).digest != (
        one.digest
    )
    assert Workspace.from_blob(one.blob).digest == one.digest


def test_from_a_directory(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "src" / "run.sh", 0o700)
    (tmp_path / "empty").mkdir()
    os.symlink("src/run.sh", tmp_path / "link")
    workspace = Workspace.from_directory(tmp_path)
    kinds = {e.path: (e.kind, e.mode, e.data) for e in workspace.entries}
    assert kinds == {
        "empty": ("dir", 0o755, b""),
        "link": ("symlink", 0o777, b"src/run.sh"),
        "src": ("dir", 0o755, b""),
        "src/run.sh": ("file", 0o755, b"#!/bin/sh\n"),
    }
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="fifo"):
        Workspace.from_directory(tmp_path)


@pytest.mark.parametrize(
    "entries",
    [
        [Entry("a", "file", 0o644, b""), Entry("a", "file", 0o644, b"")],
        [Entry("link", "symlink", 0o777, b"/etc"), Entry("link/passwd", "file", 0o644, b"x")],
        [Entry("../up", "file", 0o644, b"")],
        [Entry("a//b", "file", 0o644, b"")],
        [Entry("a", "file", 0o4755, b"")],
        [Entry("a", "device", 0o644, b"")],
    ],
    ids=["twice", "under-a-link", "dot-dot", "empty-component", "setuid", "unknown-kind"],
)
def test_invalid_workspaces_are_refused(entries):
    with pytest.raises(ValueError):
        Workspace(entries)


def test_a_damaged_blob_is_refused():
    blob = Workspace.from_files({"a": "x"}).blob
    for bad in (b"not a blob", blob + b"trailing", blob[:-1]):
        with pytest.raises(ValueError):
            Workspace.from_blob(bad)


def test_the_store_materialises_once_and_deletes_when_unused(tmp_path):
    store = WorkspaceStore(tmp_path / "store", keep_s=60)
    workspace = Workspace(
        [
            Entry("bin/tool", "file", 0o755, b"#!/bin/sh\n"),
            Entry("data/empty", "dir", 0o755),
            Entry("escape", "symlink", 0o777, b"/etc/passwd"),
        ]
    )
    loads = []

    def load():
        loads.append(1)
        return workspace.blob

    path = store.acquire(workspace.digest, load)
    assert store.acquire(workspace.digest, load) == path and loads == [1]
    assert os.stat(store.root).st_mode & 0o777 == 0o700  # nobody else on the host enters
    assert (path / "bin" / "tool").read_bytes() == b"#!/bin/sh\n"
    assert os.stat(path / "bin" / "tool").st_mode & 0o777 == 0o755
    assert os.readlink(path / "escape") == "/etc/passwd"  # written as a link, never followed
    if os.geteuid() == 0:
        assert os.lstat(path / "bin" / "tool").st_uid == NOBODY
        assert os.lstat(path / "escape").st_uid == NOBODY
    store.release(workspace.digest)
    assert store.sweep() == 0 and path.exists()  # still referenced once
    store.release(workspace.digest)
    assert store.sweep() == 0 and path.exists()  # unused, kept for keep_s
    assert store.sweep(now=float("inf")) == 1 and not path.exists()
    with pytest.raises(ValueError, match="digest"):
        store.acquire("0" * 64, lambda: workspace.blob)
    assert [p.name for p in store.root.iterdir()] == []  # no staging directory left
    store.close()
    assert not store.root.exists()


def test_stores_of_dead_workers_are_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    gone = tmp_path / f"{host}-{dead.pid}-abc123"
    alive = tmp_path / f"{host}-{os.getpid()}-abc123"
    other_host = tmp_path / f"elsewhere-{dead.pid}-abc123"
    for path in (gone, alive, other_host):
        (path / "x").mkdir(parents=True)
    assert sweep_dead_owners(tmp_path) == 1
    assert not gone.exists() and alive.exists() and other_host.exists()
