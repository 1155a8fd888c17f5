"""HumanEval-X JavaScript in the task library: import with the dataset's ids, validate in the
node sandbox, and score samples exactly as Python ones are scored."""

import gzip
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks_library.importers.humaneval_js import default_path
from tasks_library.models import TaskSet, TaskVersion

# Reference solutions of the dataset that fail under plain `node` too: 112 and 155 return
# wrong values for their own tests; 162 requires the npm package js-md5.
BROKEN_REFERENCES = {"JavaScript/112", "JavaScript/155", "JavaScript/162"}
# Prompts whose examples disagree with the reference (read and judged in the issue 4 note):
# 56's prompt is corrupted, 103 keeps Python's round-half-even result, 116's examples show a
# plain sort; 130's "tri(1) = 3" lines define the recurrence (a false alarm, for a curator).
CONTRADICTING_PROMPTS = {"JavaScript/56", "JavaScript/103", "JavaScript/116", "JavaScript/130"}


def rows() -> list[dict]:
    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def run_json(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_import_validate_and_evaluate_all_164(write_jsonl):
    report = run_json("import_tasks", "humaneval-js")
    assert report == {
        "task_set": "humaneval-js",
        "imported": 164,
        "new_versions": 164,
        "unchanged": 0,
    }
    versions = list(
        TaskVersion.objects.select_related("task", "test_suite", "environment").order_by(
            "task__task_id"
        )
    )
    assert {v.task.task_id for v in versions} == {f"JavaScript/{i}" for i in range(164)}
    first = TaskVersion.objects.get(task__task_id="JavaScript/0")
    assert first.entry_point == "hasCloseElements"
    assert first.test_suite.harness == "js-console-assert" and first.environment.runtime.startswith(
        "node"
    )
    assert (
        len(first.test_suite.hidden_test_ids) == 7 and len(first.test_suite.visible_test_ids) == 2
    )
    assert TaskSet.objects.get(name="humaneval-js").members.count() == 164

    # Mutation testing of all 164 is the benchmark's job (benchmarks/task_validation.py).
    validated = run_json(
        "validate_tasks", "--taskset", "humaneval-js", "--reference-runs", "2", "--mutants", "0"
    )
    verdicts = {row["task_id"]: row for row in validated["task_versions"]}
    flagged = {task_id for task_id, row in verdicts.items() if row["verdict"] != "valid"}
    assert flagged == BROKEN_REFERENCES | CONTRADICTING_PROMPTS, {
        t: verdicts[t] for t in flagged ^ (BROKEN_REFERENCES | CONTRADICTING_PROMPTS)
    }
    assert all(verdicts[t]["verdict"] == "broken_reference" for t in BROKEN_REFERENCES)
    assert all(
        verdicts[t]["verdict"] == "prompt_contradicts" and verdicts[t]["quarantined"]
        for t in CONTRADICTING_PROMPTS
    )
    assert "js-md5" in " ".join(verdicts["JavaScript/162"]["reasons"])

    data = rows()
    samples = [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in data]
    samples.append(
        {"task_id": "JavaScript/0", "completion": "  return true\n}\n"}
    )  # wrong: a 2nd sample of task 0
    scored = run_json(
        "evaluate_samples",
        str(write_jsonl(samples, "js-samples.jsonl")),
        "--taskset",
        "humaneval-js",
    )
    by_task = [s for s in scored["samples"] if s["task_id"] == "JavaScript/0"]
    assert [s["passed"] for s in by_task] == [True, False]
    assert 0 < by_task[1]["reward"] < 1  # the always-true answer passes the asserts expecting true
    passed = {s["task_id"] for s in scored["samples"][:164] if s["passed"]}
    assert passed == {r["task_id"] for r in data} - BROKEN_REFERENCES


@pytest.mark.django_db
def test_a_declaration_without_a_function_names_file_line_field_and_writes_nothing(write_jsonl):
    data = rows()[:3]
    data[1] = dict(data[1], declaration="/* nothing declared */\n")
    path = write_jsonl(data, "bad-js.jsonl")
    with pytest.raises(CommandError, match=r"bad-js\.jsonl:2: field 'declaration'"):
        call_command("import_tasks", "humaneval-js", "--path", str(path), stdout=StringIO())
    assert TaskVersion.objects.count() == 0 and TaskSet.objects.count() == 0
