"""The environment store: built once under a lock, published whole, verified against its
manifest; pins checked before any build."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sandboxes.environments.spec import EnvironmentSpecError, parse
from sandboxes.environments.store import (
    EnvironmentBuildError,
    EnvironmentCorrupt,
    EnvironmentStore,
    remove_tree,
)


def _writer(calls: list, *, fail: bool = False):
    def build(tree: Path) -> dict:
        calls.append(tree)
        (tree / "pkg").mkdir()
        (tree / "pkg" / "__init__.py").write_text("VALUE = 42\n")
        (tree / "link").symlink_to("pkg/__init__.py")
        if fail:
            raise EnvironmentBuildError("no such package", kind="missing_package", package="x")
        return {"resolved": [{"name": "pkg", "version": "1.0"}], "log": "built"}

    return build


def test_second_ensure_is_a_cache_hit(tmp_path):
    store = EnvironmentStore(tmp_path)
    calls: list = []
    first = store.ensure("a" * 64, {"x": 1}, _writer(calls))
    second = store.ensure("a" * 64, {"x": 1}, _writer(calls))
    assert len(calls) == 1
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert (second.tree / "pkg" / "__init__.py").read_text() == "VALUE = 42\n"
    assert second.record["resolved"] == [{"name": "pkg", "version": "1.0"}]
    assert second.record["files"] == 1 and second.record["size_bytes"] == len("VALUE = 42\n")
    assert not (second.tree / "pkg" / "__init__.py").stat().st_mode & 0o222  # read-only


def test_concurrent_builds_of_one_hash_run_once(tmp_path):
    calls: list = []
    results = []

    def one():
        results.append(EnvironmentStore(tmp_path).ensure("b" * 64, {}, _writer(calls)))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert sorted(r.cache_hit for r in results) == [False, True, True, True]


def test_failed_build_publishes_nothing_and_keeps_the_error(tmp_path):
    store = EnvironmentStore(tmp_path)
    with pytest.raises(EnvironmentBuildError, match="no such package"):
        store.ensure("c" * 64, {}, _writer([], fail=True))
    assert store.get("c" * 64) is None
    assert store.published() == []
    assert list((tmp_path / ".building").iterdir()) == []  # the half-built tree is gone
    assert store.last_failure("c" * 64)["kind"] == "missing_package"


def test_verify_names_a_changed_file(tmp_path):
    store = EnvironmentStore(tmp_path)
    built = store.ensure("d" * 64, {}, _writer([]))
    assert EnvironmentStore(tmp_path).verify("d" * 64).hash == "d" * 64
    target = built.tree / "pkg" / "__init__.py"
    target.chmod(0o644)
    target.write_text("VALUE = 43\n")
    with pytest.raises(EnvironmentCorrupt, match="pkg/__init__.py"):
        EnvironmentStore(tmp_path).verify("d" * 64)  # a fresh worker's first mount


def test_verify_refuses_what_is_not_built(tmp_path):
    with pytest.raises(EnvironmentCorrupt, match="not built"):
        EnvironmentStore(tmp_path).verify("e" * 64)


def test_remove_deletes_a_read_only_tree(tmp_path):
    store = EnvironmentStore(tmp_path)
    built = store.ensure("f" * 64, {}, _writer([]))
    store.remove("f" * 64)
    assert not built.path.exists()
    remove_tree(built.path)  # nothing left: no error


@pytest.mark.parametrize(
    "package, words",
    [
        ("numpy", "not pinned"),
        ("numpy>=2", "not pinned"),
        ("numpy==2.*", "not pinned"),
        ("numpy @ https://example.org/numpy.whl", "not pinned"),
        ("num py==1", "not a requirement"),
    ],
)
def test_unpinned_python_packages_are_refused_by_name(package, words):
    with pytest.raises(EnvironmentSpecError, match=words) as caught:
        parse("python3.11", [package])
    assert caught.value.field == "packages" and caught.value.package == package


def test_hashes_are_all_or_nothing():
    digest = "sha256:" + "0" * 64
    with pytest.raises(EnvironmentSpecError, match="has no --hash"):
        parse("python3.11", [f"numpy==2.4.6 --hash={digest}", "pandas==3.0.0"])
    spec = parse("python3.11", [f"numpy==2.4.6 --hash={digest}"])
    assert spec.require_hashes and spec.packages == [f"numpy==2.4.6 --hash={digest}"]


def test_spec_is_canonical_and_names_its_builds():
    one = parse("python3.11", ["Pandas==3.1.1", "numpy==2.4.6"])
    two = parse("python3.11", ["numpy==2.4.6", "pandas==3.1.1"])
    assert one.packages == two.packages == ["numpy==2.4.6", "pandas==3.1.1"]
    assert one.packages_hash() == two.packages_hash()
    assert parse("python3.11", []).packages_hash() is None
    assert parse("python3.11", []).root_hash() is None
    assert parse("python3.13", []).root_hash() is not None
    assert parse("python3.13", ["numpy==2.4.6"]).packages_hash() != one.packages_hash()


def test_repeated_and_unknown_are_refused():
    with pytest.raises(EnvironmentSpecError, match="listed twice"):
        parse("python3.11", ["numpy==2.4.6", "NumPy==2.4.5"])
    with pytest.raises(EnvironmentSpecError, match="unknown runtime") as caught:
        parse("ruby3", [])
    assert caught.value.field == "runtime"
    with pytest.raises(EnvironmentSpecError, match="name@X.Y.Z"):
        parse("node20", ["lodash"])
    assert parse("node20", ["lodash@4.17.21"]).packages == ["lodash@4.17.21"]


def test_published_modes_lose_write_and_set_id_bits_only(tmp_path):
    def build(tree: Path) -> dict:
        (tree / "etc").mkdir()
        secret = tree / "etc" / "shadow"
        secret.write_text("root:*:1:0:99999:7:::\n")
        secret.chmod(0o640)  # as Debian ships it: not for others
        tool = tree / "su"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o4755)
        return {}

    built = EnvironmentStore(tmp_path).ensure("9" * 64, {}, build)
    assert (built.tree / "etc" / "shadow").stat().st_mode & 0o7777 == 0o440
    assert (built.tree / "su").stat().st_mode & 0o7777 == 0o555
