"""export_tasks / import_tasks --format crucible: the round trip keeps every content hash."""

import gzip
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.importers.crucible import FORMAT
from tasks_library.models import (
    EnvironmentVersion,
    Task,
    TaskSet,
    TaskSetMember,
    TaskSetVersion,
    TaskVersion,
    TestSuiteVersion,
)
from tasks_library.services import task_version_edit


def _snapshot() -> dict:
    return {
        "versions": sorted(TaskVersion.objects.values_list("task__task_id", "content_hash")),
        "suites": sorted(TestSuiteVersion.objects.values_list("content_hash", flat=True)),
        "environments": sorted(EnvironmentVersion.objects.values_list("content_hash", flat=True)),
    }


def _wipe() -> None:
    TaskSetVersion.objects.all().delete()
    TaskSetMember.objects.all().delete()
    TaskSet.objects.all().delete()
    for model in (
        TaskVersion,
        TestSuiteVersion,
        EnvironmentVersion,
    ):  # parent links protect their targets
        model.objects.update(parent=None)
    TaskVersion.objects.all().delete()
    Task.objects.all().delete()
    TestSuiteVersion.objects.all().delete()
    EnvironmentVersion.objects.all().delete()


@pytest.mark.django_db
def test_export_then_import_round_trips_to_identical_hashes(tmp_path):
    call_command("import_tasks", "humaneval", stdout=StringIO())
    call_command("import_tasks", "humaneval-js", stdout=StringIO())
    # A version with workspace files, tags and an edited suite travels too.
    first = TaskVersion.objects.get(task__task_id="HumanEval/0")
    edited = task_version_edit(
        version=first,
        author="alice",
        change_note="data file for the example",
        files={"data/points.csv": "x\n1.0\n2.0\n"},
        timeout_s=5.0,
        test_timeout_s=1.5,
    )
    Task.objects.filter(pk=first.task_id).update(tags=["lists", "floats"])
    before = _snapshot()
    assert len(before["versions"]) == 164 * 2 + 1

    out = tmp_path / "library.jsonl.gz"
    call_command("export_tasks", "--output", str(out), stderr=StringIO())
    with gzip.open(out, "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    assert len(lines) == 164 * 2  # the latest version of each task
    assert {line["format"] for line in lines} == {FORMAT}
    exported_edit = next(line for line in lines if line["task_id"] == "HumanEval/0")
    assert exported_edit["content_hash"] == edited.content_hash
    assert exported_edit["files"] == {"data/points.csv": "x\n1.0\n2.0\n"}
    assert exported_edit["tags"] == ["lists", "floats"]

    _wipe()
    report = StringIO()
    call_command(
        "import_tasks",
        "--format",
        "crucible",
        str(out),
        "--taskset",
        "restored",
        "--json",
        stdout=report,
    )
    assert json.loads(report.getvalue())["new_versions"] == 164 * 2
    after = _snapshot()
    latest = sorted(
        (tid, h)
        for tid, h in before["versions"]
        if not (tid == "HumanEval/0" and h != edited.content_hash)
    )
    assert after["versions"] == latest
    assert set(after["suites"]) <= set(before["suites"]) and set(after["environments"]) <= set(
        before["environments"]
    )
    assert Task.objects.get(task_id="HumanEval/0").tags == ["lists", "floats"]
    restored = TaskVersion.objects.get(task__task_id="HumanEval/0")
    assert (
        restored.files == {"data/points.csv": "x\n1.0\n2.0\n"}
        and restored.test_suite.timeout_s == 5.0
    )
    assert restored.test_suite.test_timeout_s == 1.5


@pytest.mark.django_db
def test_export_of_a_task_set_to_stdout_is_in_set_order(humaneval, write_jsonl):
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[5:8])),
        "--taskset",
        "three",
        stdout=StringIO(),
    )
    out = StringIO()
    call_command("export_tasks", "--taskset", "three", stdout=out)
    ids = [json.loads(line)["task_id"] for line in out.getvalue().splitlines()]
    assert ids == [row["task_id"] for row in humaneval[5:8]]


def _crucible_line(**overrides) -> dict:
    line = {
        "format": FORMAT,
        "task_id": "T/1",
        "prompt": "def f(x):\n",
        "entry_point": "f",
        "reference_solution": "    return x + 1\n",
        "environment": {"name": "python", "runtime": "python3.11", "packages": [], "image": ""},
        "test_suite": {
            "harness": "python-check",
            "hidden_tests": "def check(candidate):\n    assert candidate(1) == 2\n",
        },
    }
    line.update(overrides)
    return line


@pytest.mark.django_db
@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"environment": {"name": "ruby", "runtime": "ruby3.3"}},
            ":2: field 'environment.runtime': unknown environment 'ruby3.3'",
        ),
        (
            {"environment": {"runtime": "node20"}},
            ":2: field 'environment.runtime': 'node20' cannot run this test suite",
        ),
        (
            {"test_suite": {"harness": "python-check"}},
            ":2: field 'test_suite.hidden_tests' missing",
        ),
        (
            {"test_suite": {"harness": "pytest", "hidden_tests": "x"}},
            ":2: field 'harness': unknown test harness 'pytest'",
        ),
        ({"format": "other/2"}, ":2: field 'format': expected 'crucible.task/1'"),
        (
            {"files": {"../etc/passwd": "x"}},
            ":2: field 'files': '../etc/passwd' must be a relative path",
        ),
        (
            {"files": {"big.txt": "é" * (600 * 1024)}},
            ":2: field 'files.big.txt': 1228800 bytes, over the 1048576 byte limit",
        ),
        (
            {"files": {f"f{k}.txt": "x" * (1000 * 1024) for k in range(9)}},
            ":2: field 'files': 9216000 bytes in all",
        ),
        ({"prompt": "x" * (17 * 1024 * 1024)}, ":2: line is"),
        (
            {
                "test_suite": {
                    "harness": "python-check",
                    "hidden_tests": "def check(c):\n    pass\n",
                    "timeout_s": 5,
                }
            },
            ":2: field 'test': the tests contain no assertion",
        ),
        ({"task_id": "T/0"}, ":2: field 'task_id': duplicate id 'T/0'"),
        (
            {
                "environment": {"runtime": "node20"},
                "files": {"a.txt": "x"},
                "test_suite": {
                    "harness": "js-console-assert",
                    "hidden_tests": "console.assert(f(1) === 2)\n",
                },
            },
            ":2: field 'files': workspace files are supported by the Python verifiers only",
        ),
        (
            {
                "test_suite": {
                    "harness": "python-check",
                    "hidden_tests": "def check(c):\n    assert c(1)\n",
                    "timeout_s": 2,
                    "test_timeout_s": 3,
                }
            },
            ":2: field 'test_timeout_s': must be a number of seconds in (0, 2]",
        ),
    ],
)
def test_bad_line_names_file_line_and_field_and_writes_nothing(write_jsonl, overrides, expected):
    path = write_jsonl([_crucible_line(task_id="T/0"), _crucible_line(**overrides)])
    with pytest.raises(CommandError) as excinfo:
        call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    message = str(excinfo.value)
    assert "nothing was written" in message and f"{path}{expected}" in message
    assert (
        not TaskVersion.objects.exists()
        and not TaskSet.objects.exists()
        and not Task.objects.exists()
    )


@pytest.mark.django_db
def test_non_utf8_line_is_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(_crucible_line()).encode() + b"\n" + b'{"task_id": "\xff"}\n')
    with pytest.raises(CommandError, match=r"bad.jsonl:2: not UTF-8 text"):
        call_command("import_tasks", "--format", "crucible", str(path), stdout=StringIO())
    assert not TaskVersion.objects.exists()
