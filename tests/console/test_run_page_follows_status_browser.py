"""In a real browser: the run page follows the run's status live. A run that ends while its page
is open loses its Cancel button and its "live" label at once (no click answered "already ended");
an interrupted run gets its Resume button; the warm start's progress shows before the first
step; an empty run's charts have sensible axes and early steps whole-number ticks."""

from pathlib import Path

import pytest

from core.events import broadcast_run_event
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.test_dashboard_views import add_steps, make_run, task_version
from tests.review.review_seed import make_roles, make_user
from training import services
from training.models import StepMetric
from training.selectors import step_event

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


@pytest.fixture
def running():
    make_roles()
    return make_run("live-status"), make_user("otto", "operator")


def steps_recorded(run, steps) -> None:
    """Steps as a trainer leaves them, then told to the run's watchers (persist, then push)."""
    version = task_version()
    add_steps(run, version, steps)
    for step in StepMetric.objects.filter(run=run, step__in=list(steps)):
        broadcast_run_event(run.pk, step_event(step))


def visible(page, selector: str) -> bool:
    return page.locator(selector).is_visible()


def test_the_page_follows_the_run_to_its_end(running, console_server, browser_page):
    run, operator = running
    page = browser_page
    sign_in(page, console_server, operator)
    page.goto(f"{console_server}/runs/{run.pk}/")
    page.wait_for_selector("#live-state:text('live')", timeout=15000)
    assert visible(page, "button:has-text('Cancel run')") and not visible(page, "#resume-button")

    # the trainer is lost: interrupted, Resume appears, Cancel stays (an interrupted run cancels)
    off_loop(services.run_transition, run_id=run.pk, to_status="interrupted", reason="node lost")
    page.wait_for_selector("#run-status:text('interrupted')", timeout=5000)
    page.wait_for_selector("#resume-button", state="visible", timeout=5000)
    assert visible(page, "button:has-text('Cancel run')")
    assert page.inner_text("#status-reason") == "node lost"

    # resumed elsewhere, then it succeeds while the page is open
    off_loop(services.run_transition, run_id=run.pk, to_status="launching", reason="resumed")
    page.wait_for_selector("#resume-button", state="hidden", timeout=5000)
    off_loop(services.run_transition, run_id=run.pk, to_status="running", reason="")
    off_loop(steps_recorded, run, [1])
    off_loop(services.run_transition, run_id=run.pk, to_status="succeeded", reason="all steps")
    page.wait_for_selector("#run-status:text('succeeded')", timeout=5000)
    page.wait_for_selector("button:has-text('Cancel run')", state="hidden", timeout=5000)
    live = page.inner_text("#live-state")
    assert "live" not in live and "ended" in live, live

    # a reload of an ended run: the same, from the server
    page.reload()
    page.wait_for_selector("#reward-heatmap[data-backfilled='1']", timeout=10000)
    assert not visible(page, "button:has-text('Cancel run')")
    assert "ended" in page.inner_text("#live-state")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run_page_ended.png"))
    assert page.errors == []


def test_empty_and_early_charts_have_sensible_axes(console_server, browser_page):
    run = off_loop(make_run, "axes")
    page = browser_page
    page.goto(f"{console_server}/runs/{run.pk}/")
    page.wait_for_selector("#reward-heatmap[data-backfilled='1']", timeout=15000)
    page.wait_for_timeout(200)  # plotly's first draw
    for chart in ("reward-heatmap", "reward-mean", "policy-stats", "loss-policy", "flag-rate"):
        x_range = page.evaluate(f"document.getElementById('{chart}')._fullLayout.xaxis.range")
        assert x_range[0] >= 0, (chart, x_range)  # not plotly's empty -1..6
        text = page.inner_text(f"#{chart}")
        assert "no steps yet" in text, (chart, text)
    # the warm start's epochs show before any step
    off_loop(
        services.run_progress_record,
        run_id=run.pk,
        phase="sft",
        done=3,
        total=18,
        detail="loss 1.234",
    )
    page.wait_for_selector("#progress:text('SFT warm start: epoch 3 of 18')", timeout=5000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run_page_empty.png"), full_page=True)

    # two early steps: the step axis ticks whole numbers only (not 1.2, 1.4...)
    off_loop(steps_recorded, run, [1, 2])
    page.wait_for_selector("#reward-heatmap[data-steps='2']", timeout=10000)
    page.wait_for_timeout(300)
    for chart in ("reward-heatmap", "reward-mean", "step-time", "policy-stats"):
        ticks = page.evaluate(
            f"[...document.querySelectorAll('#{chart} .xtick text')].map(t => t.textContent)"
        )
        assert ticks and all(t.strip().lstrip("−-").isdigit() for t in ticks), (chart, ticks)
    page.screenshot(path=str(ARTIFACTS / "run_page_two_steps.png"), full_page=True)
    assert page.errors == []
