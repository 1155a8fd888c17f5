"""The workspace a repository grading runs on, with no sandbox: tests reset, no bytecode, no
native module the task does not have, and what the runner is told to trust
(sandboxes/repository/runner.py)."""

from __future__ import annotations

import hashlib

from sandboxes.repository.runner import graded_tree
from tests.sandboxes.repository.corpus_task import BUGGY, FIX_OPS, TESTS

NATIVE = "calc/_fast.cpython-311-x86_64-linux-gnu.so"


def tree(changes, base=BUGGY):
    files = {**BUGGY, **changes}
    return graded_tree(files, TESTS.test_files, TESTS.hidden_files, base)


def test_bytecode_never_reaches_the_grading():
    graded = tree(
        {
            "calc/__pycache__/ops.cpython-311.pyc": b"bytecode",
            "calc/legacy.pyc": b"bytecode",
            "calc/old.pyo": b"bytecode",
            "tests/__pycache__/test_ops.cpython-311-pytest-8.3.4.pyc": b"bytecode",
        }
    )
    assert not any("__pycache__" in p or p.endswith((".pyc", ".pyo")) for p in graded.files)
    assert "calc/legacy.pyc" in graded.dropped


def test_a_native_module_is_the_task_s_or_none():
    base = {**BUGGY, NATIVE: b"\x7fELF the task's"}
    changed = tree({NATIVE: b"\x7fELF the submission's", "calc/new.so": b"\x7fELF"}, base)
    assert changed.files[NATIVE] == b"\x7fELF the task's"
    assert "calc/new.so" not in changed.files
    assert set(changed.dropped) == {NATIVE, "calc/new.so"}
    assert NATIVE not in tree({NATIVE: b"\x7fELF"}, base=None).files


def test_the_runner_trusts_only_what_the_submission_left_unchanged():
    graded = tree({"calc/ops.py": FIX_OPS, "calc/helper.py": b"x = 1\n"})
    assert "calc/__init__.py" in graded.unchanged
    assert "calc/ops.py" not in graded.unchanged and "calc/helper.py" not in graded.unchanged
    assert not any(p.startswith("tests/") for p in graded.unchanged)
    assert graded_tree({**BUGGY}, TESTS.test_files, TESTS.hidden_files).unchanged == ()


def test_every_test_file_is_hashed_as_the_task_has_it():
    graded = tree({"tests/test_ops.py": b"def test_ops():\n    pass\n"})
    for path, content in {**TESTS.test_files, **TESTS.hidden_files}.items():
        assert graded.files[path] == content
        assert graded.hashes[path] == hashlib.sha256(content).hexdigest()
