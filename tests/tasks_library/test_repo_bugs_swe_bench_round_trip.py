"""A task generated from a real project (repo-bugs), exported as a SWE-bench-shaped file with its
trees in a local git repository, imports as the same content and grades the same, id by id."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from tasks_library.models import TaskVersion
from tasks_library.selectors import repository_test_results
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.tasks_library.repo_bugs_helpers import import_one_inflection_task

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_a_generated_task_round_trips_through_swe_bench_and_grades_the_same(settings, tmp_path):
    settings.SDIST_CACHE = tmp_path / "sdists"
    import_one_inflection_task()
    generated = TaskVersion.objects.select_related("task", "test_suite").get()
    assert generated.verdict == "valid", generated.verdict_reasons

    rows_path, trees = tmp_path / "rows.jsonl", tmp_path / "trees"
    call_command(
        "export_tasks",
        "--format",
        "swe-bench",
        "--git-repo",
        str(trees),
        "-o",
        str(rows_path),
        stderr=StringIO(),
    )
    (row,) = [json.loads(line) for line in rows_path.read_text().splitlines()]
    assert row["FAIL_TO_PASS"] and row["PASS_TO_PASS"] and row["patch"].startswith("diff --git")
    # The same row under another instance id: a task of its own, read from the local repository.
    row["instance_id"] = "swe/" + row["instance_id"]
    rows_path.write_text(json.dumps(row) + "\n")
    call_command(
        "import_tasks", "swe-bench", str(rows_path), "--repo", str(trees), stdout=StringIO()
    )
    imported = TaskVersion.objects.get(task__task_id=row["instance_id"])
    assert imported.content_hash == generated.content_hash
    assert imported.workspace_id == generated.workspace_id

    task_versions_validate(versions=[imported], options=Options(reference_runs=2, mutants=0))
    imported.refresh_from_db()
    assert imported.verdict == "valid", imported.verdict_reasons
    results = repository_test_results(version=imported)
    assert results == repository_test_results(version=generated)
    assert {r["with_patch"] for r in results} == {"passed"}
    assert {r["without_patch"] for r in results if r["list"] == "FAIL_TO_PASS"} <= {
        "failed",
        "error",
    }
