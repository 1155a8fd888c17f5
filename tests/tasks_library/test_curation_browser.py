"""In a real browser: a curator signs in, filters, opens a task, edits it, sees the diff,
quarantines it."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import sync_playwright

from console.management.stack import Stack
from tasks_library.models import TaskVersion
from tests.browser import CHROMIUM, CHROMIUM_ARGS, browser_marks, off_loop
from tests.database import child_database_url
from tests.ports import free_port
from tests.tasks_library.conftest import PASSWORD, make_user

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "var" / "screenshots"
pytestmark = browser_marks()


@pytest.fixture
def console_server(monkeypatch):
    """The console (granian, started by the launcher) serving the test database."""
    port = free_port()
    monkeypatch.setenv("DATABASE_URL", child_database_url())
    monkeypatch.delenv("DATABASE_URL_FILE", raising=False)
    with Stack() as stack:
        yield stack.web(port)


@pytest.fixture
def curated_library(roles, humaneval, write_jsonl):
    """HumanEval/0..2: v0 valid, v1 weak, v2 pending; and a curator who signs in with a password."""
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[:3])),
        "--taskset",
        "ui",
        stdout=StringIO(),
    )
    TaskVersion.objects.filter(task__task_id="HumanEval/0").update(
        verdict="valid", mutation_score=1.0
    )
    TaskVersion.objects.filter(task__task_id="HumanEval/1").update(
        verdict="weak_suite", mutation_score=0.4
    )
    make_user("cora", "curators")


def versions_of(task_id: str) -> list[tuple]:
    return list(
        TaskVersion.objects.filter(task__task_id=task_id)
        .order_by("number")
        .values_list(
            "number", "author", "change_note", "quarantined", "quarantine_reason", "curated_by"
        )
    )


def test_curator_filters_edits_diffs_and_quarantines(console_server, curated_library):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        page.goto(f"{console_server}/tasks/")
        assert "/accounts/login/" in page.url
        page.fill("#id_username", "cora")
        page.fill("#id_password", PASSWORD)
        page.click("#login-submit")
        page.wait_for_selector("#task-table")
        assert page.url.endswith("/tasks/") and page.locator("#whoami").inner_text() == "cora"
        assert page.locator("#task-table tbody tr").count() == 3

        page.select_option("#id_verdict", "valid")
        page.click("#apply-filters")
        page.wait_for_url("**/tasks/?*verdict=valid*")
        rows = page.locator("#task-table tbody tr")
        assert rows.count() == 1 and rows.first.get_attribute("data-task-id") == "HumanEval/0"

        page.click("#task-table a:text('HumanEval/0')")
        page.wait_for_selector("#reference")
        assert "distance" in page.locator("#reference").inner_text()
        page.click("#edit-link")
        reference = page.locator("#id_reference_solution").input_value()
        assert "distance = abs(elem - elem2)" in reference
        page.fill("#id_reference_solution", reference.replace("distance", "gap"))
        page.fill("#id_change_note", "rename distance to gap")
        page.click("#save")

        page.wait_for_selector("#diff")
        assert (
            "v=2" in page.url and "created HumanEval/0 v2" in page.locator(".messages").inner_text()
        )
        assert page.locator("#versions tbody tr").count() == 2
        assert "gap = abs(elem - elem2)" in page.locator("#reference").inner_text()
        added = page.locator("#diff .add").all_inner_texts()
        removed = page.locator("#diff .del").all_inner_texts()
        assert any("gap" in line for line in added) and any("distance" in line for line in removed)
        assert off_loop(versions_of, "HumanEval/0")[1][:3] == (2, "cora", "rename distance to gap")
        page.screenshot(path=str(SCREENSHOTS / "curation-task.png"), full_page=True)

        page.click("nav a:text('Tasks')")
        row = page.locator("#task-table tbody tr[data-task-id='HumanEval/0']")
        assert "v2" in row.inner_text() and "pending" in row.inner_text()
        row.locator("input[name=ids]").check()
        page.select_option("#bulk-action", "quarantine")
        page.fill("#bulk-reason", "reference renamed; re-validate before training")
        page.click("#bulk-submit")
        page.wait_for_selector(".messages li.success")
        assert "quarantined 1 task version" in page.locator(".messages").inner_text()
        row = page.locator("#task-table tbody tr[data-task-id='HumanEval/0']")
        assert row.locator(".quarantine-cell .quarantined").inner_text() == "quarantined"
        assert page.locator("#task-table .quarantined").count() == 1
        page.screenshot(path=str(SCREENSHOTS / "curation.png"), full_page=True)

        latest = off_loop(versions_of, "HumanEval/0")[1]
        assert latest[3:] == (True, "reference renamed; re-validate before training", "cora")

        page.click("nav a:text('API docs')")  # Swagger UI from the sidecar wheel: no network needed
        page.wait_for_selector(".swagger-ui .info .title", timeout=15000)
        assert "Crucible API" in page.locator(".swagger-ui .info .title").inner_text()
        assert (
            page.locator(
                ".opblock-summary-path[data-path='/api/tasks/{task_id}/versions/']"
            ).count()
            >= 1
        )
        assert errors == []
        browser.close()
