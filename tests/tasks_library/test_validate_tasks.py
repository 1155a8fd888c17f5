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
    weak = dict(
        humaneval[5],
        task_id="Weak/suite",
        test="def check(candidate):\n    assert candidate is not None\n",
    )
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl([*good, broken, weak])),
        stdout=StringIO(),
    )
    report = validate("--taskset", "humaneval", "--mutants", "8")
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


# Prompts whose examples disagree with the canonical solution (judged in the issue 4 note):
# 47's median example is wrong, 116's examples show a plain sort, 148 writes ("Venus") for a
# tuple; 130's "tri(1) = 3" lines define the recurrence (a false alarm, for a curator).
CONTRADICTING_PROMPTS = {"HumanEval/47", "HumanEval/116", "HumanEval/130", "HumanEval/148"}


@pytest.mark.django_db
def test_all_164_humaneval_references_pass_and_contradicting_prompts_are_quarantined():
    call_command("import_tasks", "humaneval", stdout=StringIO())
    # Mutation testing of all 164 is the benchmark's job (benchmarks/task_validation.py).
    report = validate("--taskset", "humaneval", "--reference-runs", "2", "--mutants", "0")
    flagged = {r["task_id"]: r for r in report["task_versions"] if r["verdict"] != "valid"}
    assert set(flagged) == CONTRADICTING_PROMPTS, flagged
    assert report["counts"] == {"valid": 160, "prompt_contradicts": 4}
    median = flagged["HumanEval/47"]
    assert median["quarantined"] and median["report"]["examples"]["contradicting"][0][
        "example"
    ].startswith(">>> median(")
    assert all(r["report"]["reference"]["passed_runs"] == 2 for r in report["task_versions"])


@pytest.mark.django_db
def test_missing_task_set_is_a_clear_error():
    with pytest.raises(CommandError, match="task set 'nope' not found"):
        call_command("validate_tasks", "--taskset", "nope")
