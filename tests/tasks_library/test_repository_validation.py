"""Validation of repository tasks in real sandbox sessions: the reference patch resolves the task
N times, the empty patch fails every FAIL_TO_PASS id and passes every PASS_TO_PASS id, every id
is collected; otherwise a verdict with the ids as evidence, and quarantine."""

from io import StringIO

import pytest
from django.core.management import call_command

from sandboxes.repository.patches import make_patch
from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tasks_library.selectors import repository_test_results
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.tasks_library.repository_helpers import (
    BUGGY,
    FAIL_TO_PASS,
    FIXED,
    HIDDEN,
    PASS_TO_PASS,
    record,
)
from tests.tasks_library.test_import_swe_bench import git, row, write_tree

pytestmark = pytest.mark.slow
HIDDEN_ID = "tests/test_hidden.py::test_clamp_at_bound"
# A "fix" that still clamps wrongly: clamp(50, 0, 10) gives 9.
WRONG_FIX = {
    **FIXED,
    "calc/ops.py": FIXED["calc/ops.py"].replace(b"min(x, high)", b"min(x, high - 1)"),
}


@pytest.fixture
def versions(db, tmp_path, write_jsonl) -> dict[str, TaskVersion]:
    # The valid task once more, as a SWE-bench row read from a local git repository.
    root = tmp_path / "calc"
    root.mkdir()
    write_tree(root, BUGGY)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    base = git(root, "rev-parse", "HEAD")
    rows = [row(base, instance_id="acme__calc-swe", FAIL_TO_PASS=[*FAIL_TO_PASS, HIDDEN_ID])]
    call_command(
        "import_tasks", "swe-bench", str(write_jsonl(rows)), "--repo", str(root), stdout=StringIO()
    )
    repository_tasks_import(
        [
            record(
                "calc/valid", hidden_files=dict(HIDDEN), fail_to_pass=[*FAIL_TO_PASS, HIDDEN_ID]
            ),
            # A test that fails without the fix listed as PASS_TO_PASS.
            record(
                "calc/lists", hidden_files=dict(HIDDEN), pass_to_pass=[*PASS_TO_PASS, HIDDEN_ID]
            ),
            record("calc/broken", reference_patch=make_patch(BUGGY, WRONG_FIX)),
            # An id whose file exists but which names no test.
            record("calc/missing", fail_to_pass=[*FAIL_TO_PASS, "tests/test_ops.py::test_nothing"]),
            # Every FAIL_TO_PASS id passes without the fix: the task cannot fail.
            record("calc/trivial", fail_to_pass=["tests/test_ops.py::test_add"], pass_to_pass=[]),
        ],
        author="alice",
    )
    return {v.task.task_id.split("/")[-1]: v for v in TaskVersion.objects.select_related("task")}


def test_verdicts_evidence_and_quarantine(versions):
    timings = {}
    task_versions_validate(
        versions=list(versions.values()), options=Options(reference_runs=2), timings=timings
    )
    assert timings["repository"]["executions"] == 6 * 3
    got = {name: TaskVersion.objects.get(pk=v.pk) for name, v in versions.items()}

    valid = got["valid"]
    assert valid.verdict == "valid" and not valid.quarantined, valid.verdict_reasons
    assert valid.report["reference"]["passed_runs"] == 2
    results = {
        r["id"]: (r["with_patch"], r["without_patch"])
        for r in repository_test_results(version=valid)
    }
    assert results[FAIL_TO_PASS[0]] == ("passed", "failed")
    assert results[HIDDEN_ID] == ("passed", "failed")
    assert results[PASS_TO_PASS[0]] == ("passed", "passed")
    # The task says what the grading's second line compares on it.
    coverage = valid.report["differential"]
    assert coverage["literal"] > 0 and coverage["not_applicable"] == ""
    assert all(name.startswith("calc.") for name in coverage["functions"])

    # Imported from a SWE-bench row, the same task grades the same, id by id.
    swe = got["acme__calc-swe"]
    assert swe.verdict == "valid", swe.verdict_reasons
    for stage in ("reference", "empty_patch"):
        assert swe.report[stage]["per_id"] == valid.report[stage]["per_id"]

    lists = got["lists"]
    assert lists.verdict == "wrong_test_lists" and lists.quarantined
    assert lists.report["empty_patch"]["pass_to_pass_failing"] == [
        {"test": HIDDEN_ID, "status": "failed", "message": "assert 11 == 10"}
    ]
    assert HIDDEN_ID in lists.verdict_reasons[0]

    broken = got["broken"]
    assert broken.verdict == "broken_reference" and broken.quarantined
    assert broken.report["reference"]["failing"] == [
        {"test": FAIL_TO_PASS[0], "status": "failed", "message": "assert 9 == 10"}
    ]

    missing = got["missing"]
    assert missing.verdict == "broken_reference"
    assert missing.report["collection"]["missing"] == ["tests/test_ops.py::test_nothing"]
    assert any("never collected" in r and "test_nothing" in r for r in missing.verdict_reasons)

    trivial = got["trivial"]
    assert trivial.verdict == "trivial_passes" and trivial.quarantined
