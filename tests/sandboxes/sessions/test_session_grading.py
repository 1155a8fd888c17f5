"""Grading a session's work happens in a fresh sandbox, from its files only: the task's files with
the session's changes applied, its test configuration restored, none of its processes."""

from __future__ import annotations

from sandboxes import result as R
from sandboxes.grading import local_grader
from sandboxes.sessions import (
    DEFAULT_RESTORE,
    SessionLimits,
    Workspace,
    WorkspaceChanges,
    files_to_grade,
    open_session,
    text_files,
)

TASK = {
    "solution.py": "def add(a, b):\n    return 0\n",
    "offset.txt": "0\n",
    "conftest.py": "# the task's own\n",
}
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"


def _grade(files: dict[str, bytes]):
    files = text_files(files)
    program = files.pop("solution.py")
    return local_grader().grade(program, TESTS, "add", files=files)


def test_the_sessions_fix_is_graded_from_its_files(session_pool):
    workspace = Workspace.from_files(TASK)
    with open_session(workspace, runtime=session_pool.runtime) as session:
        assert _grade(files_to_grade(session.changes(), workspace.files())).status == R.FAILED
        session.write(
            "solution.py",
            "OFFSET = int(open('offset.txt').read())\ndef add(a, b):\n    return a + b + OFFSET\n",
        )
        changes = session.changes()
    assert set(changes.files) == {"solution.py"}
    graded = _grade(files_to_grade(changes, workspace.files()))
    assert graded.status == R.OK and graded.tests_passed == 2, graded


def test_nothing_of_the_session_but_its_files_reaches_grading(session_pool):
    workspace = Workspace.from_files(TASK)
    keep = SessionLimits(keep_processes=True)
    with open_session(workspace, limits=keep, runtime=session_pool.runtime) as session:
        # a daemon that would fake the answer if it could reach the grading sandbox
        planted = session.exec(
            "setsid sh -c 'while :; do echo 3 > /tmp/answer; sleep 0.05; done' > /dev/null 2>&1 &"
            " echo 'import builtins; builtins.FAKE = 1' > sitecustomize.py;"
            " echo 'raise SystemExit(0)' > conftest.py;"
            " rm offset.txt; ln -s /etc/passwd offset.txt; echo planted"
        )
        assert planted.stdout == "planted\n", planted
        session.write(
            "solution.py",
            "import os, builtins\n"
            "def add(a, b):\n"
            "    if os.path.exists('/tmp/answer') or hasattr(builtins, 'FAKE'):\n"
            "        return 3\n"
            "    return -1\n",
        )
        changes = session.changes()
    assert changes.symlinks == {"offset.txt": "/etc/passwd"}
    files = files_to_grade(changes, workspace.files())
    assert files["conftest.py"] == b"# the task's own\n"  # restored from the task
    assert "sitecustomize.py" not in files  # the task has none
    assert "offset.txt" not in files  # replaced by a link: links are not carried
    graded = _grade(files)
    # no /tmp/answer and no FAKE builtin in the fresh sandbox: the tricks give -1, both fail
    assert graded.status == R.FAILED and graded.tests_passed == 0, graded


def test_files_to_grade_applies_changes_over_the_task():
    changes = WorkspaceChanges(
        files={"a.py": b"new", "tests/conftest.py": b"planted", "b/c.txt": b"added"},
        deleted=("old.txt", "pytest.ini"),
        symlinks={"d.txt": "/etc/hostname"},
    )
    base = {"a.py": "old", "old.txt": "x", "d.txt": "y", "pytest.ini": "[pytest]\n"}
    files = files_to_grade(changes, base)
    assert files == {"a.py": b"new", "b/c.txt": b"added", "pytest.ini": b"[pytest]\n"}
    assert "*/conftest.py" in DEFAULT_RESTORE
    everything = files_to_grade(changes, base, restore=())
    assert everything["tests/conftest.py"] == b"planted" and "pytest.ini" not in everything
