"""In a real browser: a task whose hidden tests hold a very long line keeps its page within the
window (the line scrolls inside its box, the reference box stays whole), and the curation
controls on the task's own page quarantine an older version."""

from pathlib import Path

import pytest

from tasks_library.models import TaskVersion
from tasks_library.services import task_version_edit
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.conftest import browser_page, console_server, frontend_bundle  # noqa: F401
from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


@pytest.fixture
def long_line_task(library, roles):
    v1 = library[0]
    long_assert = "    assert candidate([" + ", ".join(f"{i}.0" for i in range(600)) + "], 0.5)\n"
    v2 = task_version_edit(
        version=v1,
        author="cora",
        change_note="a long case",
        hidden_tests=v1.test_suite.hidden_tests + long_assert,
    )
    TaskVersion.objects.filter(pk=v2.pk).update(verdict="valid")
    return make_user("cora", "curators"), v1, v2


def test_long_lines_stay_in_their_box_and_an_older_version_is_quarantined(
    long_line_task,
    console_server,
    browser_page,
):
    curator, v1, v2 = long_line_task
    page = browser_page
    sign_in(page, console_server, curator)
    page.goto(f"{console_server}/tasks/HumanEval/0/")
    page.wait_for_selector("#hidden-tests")
    width = page.evaluate("window.innerWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    reference = page.locator("#reference").bounding_box()
    hidden = page.locator("#hidden-tests").bounding_box()
    assert reference["x"] >= 0 and reference["x"] + reference["width"] <= width
    assert hidden["x"] + hidden["width"] <= width
    # the long line scrolls inside its own box
    assert page.evaluate(
        "(() => { const e = document.getElementById('hidden-tests');"
        " return e.scrollWidth > e.clientWidth; })()"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "task_page_long_line.png"), full_page=True)

    # v1, the older version: quarantined from its own page
    page.goto(f"{console_server}/tasks/HumanEval/0/?v=1")
    page.fill("#curate-reason", "v1 misses the long case")
    page.click("#quarantine-button")
    page.wait_for_selector("#approve-button")
    assert "quarantined HumanEval/0 v1" in page.inner_text(".messages")
    states = off_loop(
        lambda: dict(
            TaskVersion.objects.filter(pk__in=[v1.pk, v2.pk]).values_list("number", "quarantined")
        )
    )
    assert states == {1: True, 2: False}
    page.screenshot(path=str(ARTIFACTS / "task_page_curation.png"))
    assert page.errors == []
