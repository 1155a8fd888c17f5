"""import_tasks --format jsonl --map: another dataset's fields become task fields without code."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.models import TaskVersion


def _row(k: int) -> dict:
    return {
        "id": f"mbpp-like/{k}",
        "question": f'def add_{k}(a, b):\n    """Add two numbers."""\n',
        "meta": {"func": f"add_{k}"},
        "answer": {"code": "    return a + b\n"},
        "checks": (
            "def check(candidate):\n    assert candidate(1, 2) == 3\n"
            "    assert candidate(-1, 1) == 0\n"
        ),
        "labels": ["arithmetic"],
    }


MAPPING = [
    "--map",
    "task_id=id",
    "--map",
    "prompt=question",
    "--map",
    "entry_point=meta.func",
    "--map",
    "reference_solution=answer.code",
    "--map",
    "tests=checks",
    "--map",
    "tags=labels",
]


@pytest.mark.django_db
def test_mapped_dataset_imports_and_validates(write_jsonl):
    path = write_jsonl([_row(1), _row(2)], "mine.jsonl")
    out = StringIO()
    call_command("import_tasks", "--format", "jsonl", str(path), *MAPPING, "--json", stdout=out)
    assert json.loads(out.getvalue()) == {
        "task_set": "mine",
        "imported": 2,
        "new_versions": 2,
        "unchanged": 0,
    }
    version = TaskVersion.objects.get(task__task_id="mbpp-like/2")
    assert version.entry_point == "add_2" and version.reference_solution == "    return a + b\n"
    assert version.test_suite.hidden_test_ids == ["assert_0", "assert_1"]
    assert version.task.tags == ["arithmetic"] and version.task.source == "jsonl"
    call_command("validate_tasks", "--taskset", "mine", "--reference-runs", "2", stdout=StringIO())
    version.refresh_from_db()
    assert version.verdict in ("valid", "weak_suite") and not version.quarantined


@pytest.mark.django_db
@pytest.mark.parametrize(
    "mapping, expected",
    [
        (
            ["--map", "prompt=question"],
            (
                "mine.jsonl:1: missing field 'task_id' for task_id (map it with --map "
                "task_id=DATASET_FIELD)"
            ),
        ),
        (
            MAPPING[:6] + ["--map", "reference_solution=answer.nope", "--map", "tests=checks"],
            "mine.jsonl:1: missing field 'answer.nope'",
        ),
        (["--map", "promt=question"], "unknown task field 'promt'"),
        (["--map", "prompt"], "expected TASK_FIELD=DATASET_FIELD"),
        (
            MAPPING[:4]
            + [
                "--map",
                "entry_point=labels",
                "--map",
                "reference_solution=answer.code",
                "--map",
                "tests=checks",
            ],
            "field 'labels' (mapped to entry_point) must be a non-empty string",
        ),
    ],
)
def test_bad_mapping_is_refused_and_nothing_written(write_jsonl, mapping, expected):
    path = write_jsonl([_row(1)], "mine.jsonl")
    with pytest.raises(CommandError) as excinfo:
        call_command("import_tasks", "--format", "jsonl", str(path), *mapping, stdout=StringIO())
    assert expected in str(excinfo.value)
    assert not TaskVersion.objects.exists()
