"""validate_tasks: the reference passes, a trivial solution fails; verdicts stored and reported."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.models import TaskVersion


def validate(*args) -> dict:
    out = StringIO()
    call_command("validate_tasks", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_real_tasks_valid_broken_reference_and_weak_suite_flagged(humaneval, write_jsonl):
    good = humaneval[:4]
    broken = dict(humaneval[4], task_id="Broken/reference", canonical_solution="    return None\n")
    weak = dict(humaneval[5], task_id="Weak/suite", test="def check(candidate):\n    assert candidate is not None\n")
    call_command("import_tasks", "humaneval", "--path", str(write_jsonl([*good, broken, weak])), stdout=StringIO())
    report = validate("--taskset", "humaneval")
    verdicts = {row["task_id"]: row for row in report["task_versions"]}
    for row in good:
        assert verdicts[row["task_id"]]["verdict"] == "valid"
        assert verdicts[row["task_id"]]["reasons"] == []
    assert verdicts["Broken/reference"]["verdict"] == "broken_reference"
    assert verdicts["Broken/reference"]["reasons"]
    assert verdicts["Weak/suite"]["verdict"] == "trivial_passes"
    assert report["counts"] == {"valid": 4, "broken_reference": 1, "trivial_passes": 1}
    assert all(len(row["version"]) == 12 for row in report["task_versions"])
    stored = TaskVersion.objects.get(task__task_id="Broken/reference")
    assert stored.verdict == "broken_reference" and stored.validated_at is not None


@pytest.mark.django_db
def test_all_164_humaneval_tasks_are_valid():
    call_command("import_tasks", "humaneval", stdout=StringIO())
    report = validate("--taskset", "humaneval")
    assert report["counts"] == {"valid": 164}, [r for r in report["task_versions"] if r["verdict"] != "valid"]


@pytest.mark.django_db
def test_missing_task_set_is_a_clear_error():
    with pytest.raises(CommandError, match="task set 'nope' not found"):
        call_command("validate_tasks", "--taskset", "nope")
