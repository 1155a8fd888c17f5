"""import_tasks humaneval: 164 tasks with their ids, idempotent, versioned, all-or-nothing."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.models import Task, TaskSet, TaskVersion, TestSuiteVersion


def run_import(*args) -> dict:
    out = StringIO()
    call_command("import_tasks", "humaneval", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_imports_all_164_with_dataset_ids(humaneval):
    report = run_import()
    assert report == {"task_set": "humaneval", "imported": 164, "new_versions": 164, "unchanged": 0}
    ids = list(
        TaskSet.objects.get(name="humaneval").members.values_list(
            "task_version__task__task_id", flat=True
        )
    )
    assert ids == [row["task_id"] for row in humaneval]
    assert ids[0] == "HumanEval/0"
    version = TaskVersion.objects.get(task__task_id="HumanEval/0")
    assert version.reference_solution == humaneval[0]["canonical_solution"]
    assert len(version.content_hash) == 64


@pytest.mark.django_db
def test_second_import_creates_no_new_version():
    run_import()
    report = run_import()
    assert report["new_versions"] == 0 and report["unchanged"] == 164
    assert TaskVersion.objects.count() == 164


@pytest.mark.django_db
def test_changed_task_gets_a_new_version_and_keeps_the_old(humaneval, write_jsonl):
    rows = humaneval[:3]
    run_import("--path", str(write_jsonl(rows)))
    changed = [
        dict(rows[0], canonical_solution=rows[0]["canonical_solution"] + "\n# tidied\n"),
        *rows[1:],
    ]
    report = run_import("--path", str(write_jsonl(changed, "changed.jsonl")))
    assert report["new_versions"] == 1 and report["unchanged"] == 2
    versions = list(TaskVersion.objects.filter(task__task_id=rows[0]["task_id"]).order_by("number"))
    assert [v.number for v in versions] == [1, 2]
    assert versions[1].parent == versions[0]
    assert versions[0].reference_solution == rows[0]["canonical_solution"]
    pinned = TaskSet.objects.get(name="humaneval").members.get(
        task_version__task__task_id=rows[0]["task_id"]
    )
    assert pinned.task_version == versions[1]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad_line, expected",
    [
        (b"{not json", "not valid JSON"),
        (
            (
                b'{"task_id": "X/1", "prompt": "def f():\\n", "entry_point": "f", '
                b'"test": "def check(c):\\n    assert c()\\n"}'
            ),
            "missing field 'canonical_solution'",
        ),
        (b'["a list"]', "expected a JSON object"),
        (
            (
                b'{"task_id": "X/\xff", "prompt": "", "entry_point": "f", '
                b'"canonical_solution": "", "test": ""}'
            ),
            "not UTF-8",
        ),
        (
            (
                b'{"task_id": "X/2", "prompt": "def f():\\n", "entry_point": "f", '
                b'"canonical_solution": "  return 1\\n", "test": "def check(:"}'
            ),
            "field 'test'",
        ),
    ],
    ids=["malformed", "missing-field", "not-object", "non-utf8", "tests-do-not-parse"],
)
def test_bad_line_names_file_line_field_and_writes_nothing(
    humaneval, write_jsonl, bad_line, expected
):
    path = write_jsonl([humaneval[0], humaneval[1], bad_line])
    with pytest.raises(CommandError) as info:
        run_import("--path", str(path))
    message = str(info.value)
    assert f"{path}:3" in message and expected in message and "nothing was written" in message
    assert Task.objects.count() == 0 and TaskVersion.objects.count() == 0
    assert TestSuiteVersion.objects.count() == 0 and TaskSet.objects.count() == 0


@pytest.mark.django_db
def test_duplicate_task_id_is_refused(humaneval, write_jsonl):
    with pytest.raises(CommandError, match=r":2: field 'task_id': duplicate id 'HumanEval/0'"):
        run_import("--path", str(write_jsonl([humaneval[0], humaneval[0]])))
    assert TaskVersion.objects.count() == 0


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="nope.jsonl is not a file"):
        call_command("import_tasks", "humaneval", "--path", str(tmp_path / "nope.jsonl"))


@pytest.mark.django_db
def test_empty_file_and_blank_task_set_name_are_refused(write_jsonl, humaneval):
    with pytest.raises(CommandError, match="holds no task"):
        run_import("--path", str(write_jsonl([], "empty.jsonl")))
    with pytest.raises(CommandError, match="--taskset must be a non-empty name"):
        run_import("--path", str(write_jsonl(humaneval[:1])), "--taskset", "  ")
    assert TaskSet.objects.count() == 0 and TaskVersion.objects.count() == 0
