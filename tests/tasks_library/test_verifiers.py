"""Verifiers beyond unit tests: output comparison (values within a tolerance, files) and custom
checkers.

The worked examples ship with Crucible (``import_tasks verifier-examples``); they import,
validate and grade like any other task, in the sandbox, with hostile submissions too.
"""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import run_many
from sandboxes.suites import harness
from tasks_library.models import TaskVersion
from tasks_library.validation.pipeline import Options, task_versions_validate


@pytest.fixture
def examples():
    call_command("import_tasks", "verifier-examples", stdout=StringIO())
    return {
        v.task.task_id: v
        for v in TaskVersion.objects.select_related("task", "test_suite", "environment")
    }


def grade(version: TaskVersion, script: str) -> R.ExecutionResult:
    suite = version.test_suite
    request = harness(suite.harness).request(
        version.prompt + script,
        suite.hidden_tests,
        version.entry_point,
        prompt=version.prompt,
        limits=Limits(wall_timeout_s=10),
        files=version.files,
    )
    return run_many([request])[0]


@pytest.mark.django_db
def test_examples_import_and_validate(examples):
    assert sorted(examples) == [
        "examples/csv-to-jsonl",
        "examples/sales-summary",
        "examples/top-words",
    ]
    assert {v.test_suite.harness for v in examples.values()} == {"output-match", "custom-checker"}
    assert "data/sales.csv" in examples["examples/sales-summary"].files
    versions = list(examples.values())
    task_versions_validate(versions=versions, options=Options(reference_runs=3, mutants=12))
    for version in versions:
        version.refresh_from_db()
        assert version.verdict in ("valid", "weak_suite"), (
            version.task.task_id,
            version.verdict_reasons,
        )
        assert (
            version.report["reference"]["passed_runs"] == 3
            and version.report["trivial"]["tests_passed"] == 0
        )
        assert (
            version.report["mutation"]["mutants"] > 0 and version.report["mutation"]["killed"] > 0
        )


@pytest.mark.django_db
def test_numbers_are_compared_within_the_tolerance(examples):
    version = examples["examples/sales-summary"]
    reference = version.reference_solution
    close = reference.replace("total = sum(", "total = (1 + 1e-9) * sum(")
    off = reference.replace("total = sum(", "total = 1.001 * sum(")
    assert grade(version, reference).status == R.OK
    assert grade(version, close).status == R.OK
    result = grade(version, off)
    assert result.status == R.FAILED and result.tests[0].error.startswith("got ")


@pytest.mark.django_db
def test_output_file_is_compared_line_by_line(examples):
    version = examples["examples/csv-to-jsonl"]
    unsorted = version.reference_solution.replace(
        'key=lambda row: row["name"]', 'key=lambda row: row["name"], reverse=True'
    )
    result = grade(version, unsorted)
    assert (
        result.status == R.FAILED
        and "line" in result.tests[0].error
        and "differs" in result.tests[0].error
    )
    assert (
        grade(version, version.reference_solution + "import sys\nsys.exit(0)\n").status == R.OK
    )  # a script may exit 0
    crashed = grade(version, version.reference_solution + "raise SystemExit(3)\n")
    assert crashed.status != R.OK and "SystemExit" in crashed.detail
    silent = grade(version, "pass\n")
    assert (
        silent.status == R.FAILED and silent.tests[0].error == "the program wrote no people.jsonl"
    )


@pytest.mark.django_db
def test_custom_checker_gives_partial_credit_with_a_reason(examples):
    version = examples["examples/top-words"]
    full = grade(version, version.reference_solution)
    assert full.status == R.OK and full.score == 1.0 and full.tests[0].score == 1.0
    three = version.reference_solution.replace("[:5]", "[:3]")
    partial = grade(version, three)
    assert partial.status == R.FAILED
    assert (
        partial.score == pytest.approx(3 / 5 * 0.9)
        and partial.tests[0].error == "3 of the 5 most frequent words listed"
    )


@pytest.mark.django_db
def test_the_expected_values_are_out_of_the_submissions_reach(examples):
    version = examples["examples/sales-summary"]
    expected = json.loads(version.test_suite.hidden_tests)["outputs"][0]["expected"]
    needle = repr(expected["total_revenue"])[:8]
    # The needle is spelled backwards in the source, so the script does not find itself.
    snoop = f"""
import os
needle = {needle[::-1]!r}[::-1]
found = []
for root in ("/", "/tmp", "/proc"):
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath.startswith(("/proc/sys", "/sys", "/usr", "/proc/self/task")):
            dirnames[:] = []
            continue
        for name in filenames:
            try:
                with open(os.path.join(dirpath, name), errors="ignore") as handle:
                    if needle in handle.read(1_000_000):
                        found.append(os.path.join(dirpath, name))
            except OSError:
                pass
with open("summary.json", "w") as handle:
    handle.write("{{}}")
print("FOUND", found)
"""
    result = grade(version, snoop)
    assert result.status == R.FAILED
    assert "FOUND []" in result.stdout, result.stdout[-500:]


@pytest.mark.django_db
def test_evaluate_samples_rewards_partial_credit(examples, tmp_path):
    version = examples["examples/top-words"]
    call_command("import_tasks", "verifier-examples", "--taskset", "ex", stdout=StringIO())
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        json.dumps(
            {
                "task_id": "examples/top-words",
                "completion": version.reference_solution.replace("[:5]", "[:4]"),
            }
        )
        + "\n"
    )
    out = StringIO()
    call_command("evaluate_samples", "--taskset", "ex", str(samples), "--json", stdout=out)
    report = json.loads(out.getvalue())
    sample = report["samples"][0]
    assert sample["reward"] == pytest.approx(4 / 5 * 0.9) and sample["passed"] is False
