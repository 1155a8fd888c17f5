"""In a real browser: a curator validates a task version from its page; the job's panel says it is
queued, then, as a validation worker runs it (here: the worker's task run in this process, the
sandbox real), shows its stages and the verdict, and the page's verdict badge changes, all
without a reload. The same from the task list's bulk bar."""

from pathlib import Path

import pytest

from tasks_library.models import TaskVersion, ValidationJob
from tasks_library.tasks import validate_task_versions
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.conftest import browser_page, console_server, frontend_bundle  # noqa: F401
from tests.tasks_library.conftest import (  # noqa: F401 (fixtures)
    make_user,
    no_queued_validation,
    roles,
)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()
LIGHT = {"reference_runs": 1, "mutants": 2}


@pytest.fixture
def pending(library, roles):
    TaskVersion.objects.filter(pk=library[0].pk).update(verdict="pending", mutation_score=None)
    return make_user("cora", "curators"), library


def run_the_worker(job_id: int) -> None:
    """What a validation worker does with the queued job (lighter options, same code)."""
    job = ValidationJob.objects.get(pk=job_id)
    validate_task_versions.run(job.version_ids, LIGHT, job.pk)


def test_validation_progress_and_verdict_appear_without_a_reload(
    pending, no_queued_validation, console_server, browser_page
):
    curator, library = pending
    page = browser_page
    sign_in(page, console_server, curator)
    page.goto(f"{console_server}/tasks/HumanEval/0/")
    assert page.inner_text("#verdict") == "pending"
    page.click("#validate-button")
    page.wait_for_selector("#job-panel[data-status='queued']")
    assert "waiting for a validation worker" in page.inner_text("#job-stage")
    page.evaluate("window.stillTheSamePage = true")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "validation_job_queued.png"))
    job_id = int(page.get_attribute("#job-panel", "data-url").rstrip("/").split("/")[-1])

    off_loop(run_the_worker, job_id)
    page.wait_for_selector("#job-panel[data-status='done']", timeout=10000)
    assert page.evaluate("window.stillTheSamePage === true")  # no reload
    assert page.inner_text("#verdict") == "valid"
    assert "valid" in page.inner_text("#job-results") and "HumanEval/0 v1" in page.inner_text(
        "#job-results"
    )
    page.screenshot(path=str(ARTIFACTS / "validation_job_done.png"))

    # from the list: two versions validated in one job, their rows updated in place
    off_loop(
        lambda: TaskVersion.objects.filter(pk__in=[library[0].pk, library[2].pk]).update(
            verdict="pending"
        )
    )
    page.goto(f"{console_server}/tasks/")
    page.check(f"input[name=ids][value='{library[0].pk}']")
    page.check(f"input[name=ids][value='{library[2].pk}']")
    page.select_option("#bulk-action", "validate")
    page.click("#bulk-submit")
    page.wait_for_selector("#job-panel[data-status='queued']")
    page.evaluate("window.stillTheSamePage = true")
    job_id = int(page.get_attribute("#job-panel", "data-url").rstrip("/").split("/")[-1])
    off_loop(run_the_worker, job_id)
    page.wait_for_selector("#job-panel[data-status='done']", timeout=10000)
    assert page.evaluate("window.stillTheSamePage === true")
    verdicts = page.eval_on_selector_all(
        "#task-table tr[data-version-id] td.verdict-cell", "cells => cells.map(c => c.innerText)"
    )
    assert "pending" not in verdicts[:1] + verdicts[2:], verdicts
    page.screenshot(path=str(ARTIFACTS / "validation_job_list.png"), full_page=True)
    assert page.errors == []
