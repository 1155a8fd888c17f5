"""In a real browser, the structured launch form: the rollout mode, the task set, the steps and
the key settings are fields with their ranges (the raw config still editable below); the settings
only agent runs read show in agent mode, and a task set of repository tasks switches the mode to
agent; a value out of range comes back on its own field, what was typed kept."""

from pathlib import Path

from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.test_run_launch_form import one_task_set
from tests.review.review_seed import make_roles, make_user
from tests.tasks_library.repository_helpers import record

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()


def seed():
    make_roles()
    one_task_set("functions")
    repository_tasks_import([record()], task_set_name="cachetools-bugs")
    TaskVersion.objects.filter(workspace__isnull=False).update(verdict=TaskVersion.VERDICT_VALID)
    return make_user("cora", "curator")


def test_the_form_has_its_settings_as_fields(console_server, browser_page):
    page = browser_page
    sign_in(page, console_server, off_loop(seed))
    page.goto(f"{console_server}/runs/new/")
    page.select_option("#id_task_set", label="functions")
    assert page.input_value("#id_rollout_mode") == "completion"
    assert page.locator("#row-max_tokens").is_hidden()
    assert page.get_attribute("#id_group_size", "min") == "2"
    assert page.get_attribute("#id_group_size", "max") == "1024"
    assert page.get_attribute("#id_lr", "placeholder") == "0.0002"

    page.select_option("#id_task_set", label="cachetools-bugs")
    assert page.input_value("#id_rollout_mode") == "agent"
    assert page.locator("#mode-note").is_visible() and page.locator("#row-max_tokens").is_visible()
    page.fill("#id_group_size", "1")
    page.fill("#id_max_turns", "12")
    page.fill("#id_config", 'reward_weights={"resolved": 1}')
    page.click("#launch-submit")
    page.wait_for_selector("#errors-group_size")
    assert "at least 2" in page.inner_text("#errors-group_size")
    assert page.input_value("#id_max_turns") == "12"  # what was typed is kept
    assert page.input_value("#id_config") == 'reward_weights={"resolved": 1}'
    assert page.input_value("#id_rollout_mode") == "agent"
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "launch_form.png"), full_page=True)
    assert page.errors == []
