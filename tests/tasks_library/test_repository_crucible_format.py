"""Repository tasks in Crucible's format: export_tasks then import_tasks --format crucible gives
identical content hashes (workspace, hidden files, binary files), beside function tasks."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.models import RepositoryWorkspace, Task, TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.repository_helpers import BUGGY, HIDDEN, record
from tests.tasks_library.test_crucible_format import _crucible_line, _snapshot, _wipe

LOGO = bytes(range(256)) * 4  # not UTF-8: travels as base64


def _library(tmp_path):
    """One function task and two repository tasks (one with hidden and binary files)."""
    path = tmp_path / "function.jsonl"
    path.write_text(json.dumps(_crucible_line()) + "\n")
    call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    repository_tasks_import(
        [
            record("calc/clamp-1"),
            record(
                "calc/clamp-2",
                files={**BUGGY, "docs/logo.png": LOGO},
                hidden_files={**HIDDEN, "tests/data.bin": b"\xff\x00"},
                tags=["clamp"],
                test_command="pytest -q -x tests",
            ),
        ],
        author="alice",
    )


@pytest.mark.django_db
def test_export_then_import_round_trips_repository_tasks(tmp_path):
    _library(tmp_path)
    before = _snapshot()
    workspaces = sorted(RepositoryWorkspace.objects.values_list("digest", flat=True))
    out = tmp_path / "library.jsonl"
    call_command("export_tasks", "--output", str(out), stderr=StringIO())
    lines = {line["task_id"]: line for line in map(json.loads, out.read_text().splitlines())}
    exported = lines["calc/clamp-2"]
    assert exported["test_suite"]["harness"] == "pytest-repo"
    assert exported["workspace"]["files"]["calc/ops.py"] == BUGGY["calc/ops.py"].decode()
    assert "docs/logo.png" in exported["workspace"]["binary"]
    assert exported["test_suite"]["hidden_files"]["binary"] == {"tests/data.bin": "/wA="}
    assert exported["licence"] == "MIT" and exported["metadata"]["package"] == "calc"

    _wipe()
    RepositoryWorkspace.objects.all().delete()
    call_command("import_tasks", "--format", "crucible", str(out), stdout=StringIO())
    assert _snapshot() == before
    assert sorted(RepositoryWorkspace.objects.values_list("digest", flat=True)) == workspaces
    restored = TaskVersion.objects.get(task__task_id="calc/clamp-2")
    assert restored.workspace.files()["docs/logo.png"] == LOGO
    assert restored.test_suite.hidden_files.files()["tests/data.bin"] == b"\xff\x00"
    assert restored.test_suite.test_command == "pytest -q -x tests"
    task = Task.objects.get(task_id="calc/clamp-2")
    assert (task.tags, task.licence, task.source) == (["clamp"], "MIT", "test-repo")


@pytest.mark.django_db
def test_a_bad_repository_line_names_line_and_field(tmp_path):
    _library(tmp_path)
    out = tmp_path / "library.jsonl"
    call_command("export_tasks", "--output", str(out), stderr=StringIO())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    broken = next(line for line in lines if line["task_id"] == "calc/clamp-1")
    broken["test_suite"]["fail_to_pass"] = ["tests/test_ops.py::test_clamp_above", 7]
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _wipe()
    with pytest.raises(CommandError, match=r"library.jsonl:\d: field 'fail_to_pass': expected"):
        call_command("import_tasks", "--format", "crucible", str(out), stdout=StringIO())
    assert not Task.objects.exists()
