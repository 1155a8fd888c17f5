"""Which files a repository grading takes from the task version, and which pytest
configuration it hands pytest (sandboxes/repository/paths.py)."""

from __future__ import annotations

import pytest

from sandboxes.repository import RepositoryTests, grading_files, is_test_path
from sandboxes.repository.grading import pytest_options
from sandboxes.repository.paths import pytest_config


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_ops.py", True),
        ("pkg/tests/helpers.py", True),
        ("test/data/input.json", True),
        ("pkg/test_utils.py", True),
        ("pkg/ops_test.py", True),
        ("conftest.py", True),
        ("pkg/sub/conftest.py", True),
        ("pytest.ini", True),
        ("tests/pytest.ini", True),
        (".pytest.ini", True),
        ("pytest.toml", True),
        ("tox.ini", True),
        ("setup.cfg", True),
        ("pyproject.toml", True),
        ("sitecustomize.py", True),
        ("lib/usercustomize.py", True),
        ("evil.pth", True),
        ("pkg/ops.py", False),
        ("pkg/testing.py", False),
        ("pkg/contest.py", False),
        ("README.md", False),
        ("docs/testing/guide.md", False),
    ],
)
def test_test_paths(path, is_test):
    assert is_test_path(path) is is_test


TASK = {
    "pkg/ops.py": b"buggy\n",
    "tests/test_ops.py": b"task test\n",
    "conftest.py": b"task conftest\n",
    "pyproject.toml": (
        b"[project]\nname = 'pkg'\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n"
    ),
}
TEST_FILES = {p: c for p, c in TASK.items() if is_test_path(p)}


def test_the_submission_keeps_its_code_and_metadata_but_not_its_tests():
    submission = {
        "pkg/ops.py": b"fixed\n",
        "tests/test_ops.py": b"edited test\n",
        "tests/test_new.py": b"its own test\n",
        "tests/conftest.py": b"planted\n",
        "conftest.py": b"rewritten\n",
        "pytest.ini": b"[pytest]\naddopts = -p evil\n",
        "sitecustomize.py": b"import evil\n",
        "pyproject.toml": b"[project]\nname = 'pkg'\nversion = '2'\n",
        ".git/HEAD": b"ref: refs/heads/main\n",
        "notes.txt": b"kept\n",
    }
    final = grading_files(submission, TEST_FILES, {"tests/test_hidden.py": b"hidden\n"})
    assert final == {
        "conftest.py": b"task conftest\n",
        "notes.txt": b"kept\n",
        "pkg/ops.py": b"fixed\n",
        "pyproject.toml": b"[project]\nname = 'pkg'\nversion = '2'\n",
        "tests/test_hidden.py": b"hidden\n",
        "tests/test_ops.py": b"task test\n",
    }
    # A deleted test file comes back; so does the task's pyproject.toml when it was deleted.
    final = grading_files({"pkg/ops.py": b"fixed\n"}, TEST_FILES, {})
    assert final["tests/test_ops.py"] == b"task test\n"
    assert final["pyproject.toml"] == TASK["pyproject.toml"]


@pytest.mark.parametrize(
    ("files", "name", "content"),
    [
        ({}, ".crucible-pytest.ini", b"[pytest]\n"),
        (TEST_FILES, ".crucible-pytest.toml", TASK["pyproject.toml"]),
        ({"pyproject.toml": b"[project]\nname = 'x'\n"}, ".crucible-pytest.ini", b"[pytest]\n"),
        (
            {"setup.cfg": b"[tool:pytest]\nx = 1\n"},
            ".crucible-pytest.cfg",
            b"[tool:pytest]\nx = 1\n",
        ),
        (
            {"setup.cfg": b"[metadata]\nname = x\n", "tox.ini": b"[pytest]\ny = 2\n"},
            ".crucible-pytest.ini",
            b"[pytest]\ny = 2\n",
        ),
        (
            {"pytest.ini": b"[pytest]\nz = 3\n", **TEST_FILES},
            ".crucible-pytest.ini",
            b"[pytest]\nz = 3\n",
        ),
        ({"pytest.ini": b"# empty\n", **TEST_FILES}, ".crucible-pytest.ini", b"[pytest]\n"),
        ({"tests/pytest.ini": b"[pytest]\nw = 4\n"}, ".crucible-pytest.ini", b"[pytest]\n"),
    ],
)
def test_pytest_reads_the_task_configuration_pytest_would_choose(files, name, content):
    assert pytest_config(files) == (name, content)


def test_bad_tests_and_commands_are_refused_by_name():
    assert pytest_options("python -m pytest -q tests") == ["-q", "tests"]
    assert pytest_options("pytest -p pytester -pno:cacheprovider") == [
        "-p",
        "pytester",
        "-pno:cacheprovider",
    ]
    for command, word in (
        ("pytest -p ../evil.py", "-p"),
        ("pytest --rootdir=/", "--rootdir"),
        ("pytest -c x.ini", "-c"),
        ("make test", "pytest"),
    ):
        with pytest.raises(ValueError, match=word):
            pytest_options(command)
    with pytest.raises(ValueError, match="both"):
        RepositoryTests(fail_to_pass=("a::b",), pass_to_pass=("a::b",))
    with pytest.raises(ValueError, match="at least one"):
        RepositoryTests(fail_to_pass=(), pass_to_pass=())
    with pytest.raises(ValueError, match="fail_to_pass"):
        RepositoryTests(fail_to_pass="a::b", pass_to_pass=())
    with pytest.raises(ValueError, match="timeout_s"):
        RepositoryTests(fail_to_pass=("a::b",), pass_to_pass=(), timeout_s=0)
