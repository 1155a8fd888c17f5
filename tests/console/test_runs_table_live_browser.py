"""In a real browser: the runs table follows its runs without a reload (a run once stayed
"launching 0/2" after it had succeeded): status, steps, duration, the metric columns and the
run's warnings change in place as they are recorded, and a run launched meanwhile is announced.
The table fits a 1,440-pixel window and a tag never breaks inside a word."""

from pathlib import Path

from tests.browser import browser_marks, off_loop
from tests.training.conftest import one_task_run
from tests.training.test_step_record_nul_text import rollout_with_nul
from training import services
from training.models import TrainingRun

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()
HOSTILE = "<img src=x onerror=\"document.title='owned'\">"


def seed():
    runs = []
    for i in range(4):
        run = one_task_run()
        run.name = f"agent sweep point {i} with a long descriptive name"
        run.tags = ["lr-sweep-3e-4", "cachetools-5.5.0", "agent", f"seed-{i}", HOSTILE]
        run.description = "repository tasks from cachetools, agent rollouts " * 3
        run.launched_by = "operator-with-a-long-name (command line)"
        run.save()
        runs.append(run)
    return runs


def record(run, step: int, metrics: dict) -> None:
    version_id = run.task_versions.get().pk
    services.step_record(
        run_id=run.pk, step=step, rollouts=[rollout_with_nul(version_id)], metrics=metrics
    )


def test_the_table_follows_its_runs_and_fits_the_window(console_server, browser_page):
    runs = off_loop(seed)
    live = runs[0]
    off_loop(services.run_transition, run_id=live.pk, to_status=TrainingRun.LAUNCHING)
    page = browser_page
    page.goto(f"{console_server}/")
    page.wait_for_selector("#table-live:text('live')", timeout=15000)
    row = f"#runs-table tr[data-run-id='{live.pk}']"
    assert page.inner_text(f"{row} .status") == "launching"
    assert page.inner_text(f"{row} .steps-cell") == "0/3"
    page.evaluate("window.stillTheSamePage = true")

    fits = page.evaluate(
        "() => { const box = document.querySelector('.table-scroll');"
        " return [document.getElementById('runs-table').scrollWidth, box.clientWidth]; }"
    )
    assert fits[0] <= fits[1], f"the table is {fits[0]} px wide in {fits[1]} px"
    broken = page.evaluate(
        "() => Array.from(document.querySelectorAll('#runs-table .tag'))"
        ".filter((tag) => tag.getClientRects().length !== 1).map((tag) => tag.textContent)"
    )
    assert broken == []
    assert page.locator(".tag", has_text="onerror").count() == 4  # a hostile tag stays text

    def train():
        services.run_transition(run_id=live.pk, to_status=TrainingRun.RUNNING)
        record(live, 1, {"reward/pass_rate": 0.25, "tokens/trained": 0, "groups/zero_advantage": 1,
                         "groups/total": 1})  # fmt: skip
        record(live, 2, {"reward/pass_rate": 0.75, "tokens/trained": 80, "groups/zero_advantage": 0,
                         "groups/total": 1})  # fmt: skip

    off_loop(train)
    page.wait_for_selector(f"{row} .steps-cell:text('2/3')", timeout=10000)
    assert page.inner_text(f"{row} .status") == "running"
    page.wait_for_selector(f"{row} .run-warnings", timeout=10000)
    assert "no token trained" in page.inner_text(f"{row} .run-warnings")
    latest = page.locator(f"{row} td.metric-latest[data-metric='reward/pass_rate']")
    best = page.locator(f"{row} td.metric-best[data-metric='reward/pass_rate']")
    assert latest.inner_text() == "0.750" and best.inner_text() == "0.750"

    off_loop(services.run_transition, run_id=live.pk, to_status=TrainingRun.SUCCEEDED)
    page.wait_for_selector(f"{row} .status:text('succeeded')", timeout=10000)

    def launch_another():  # launched elsewhere: announced, not drawn in the sorted table
        other = one_task_run()
        services.run_transition(run_id=other.pk, to_status=TrainingRun.LAUNCHING)

    off_loop(launch_another)
    page.wait_for_selector("#new-runs:not([hidden])", timeout=10000)
    assert page.inner_text("#new-runs b") == "1"
    assert page.evaluate("window.stillTheSamePage === true")  # no reload
    assert page.title() != "owned"
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "runs_table_live.png"), full_page=True)
    assert page.errors == []
