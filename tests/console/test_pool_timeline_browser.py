"""In a real browser: the run page's sandbox pool chart draws the trainer's phases as bands behind
the pool and queue series, from the back-fill, and gains each new step live over the websocket."""

from __future__ import annotations

from pathlib import Path

from tests.browser import browser_marks, off_loop
from tests.console.test_pool_timeline_payload import record, run_and_spec
from training.phase import PhaseTracker

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()


def test_pool_chart_draws_phase_bands_and_gains_steps_live(console_server, browser_page):
    run, spec = off_loop(run_and_spec, "pool-browser")
    tracker = PhaseTracker(run_id=run.pk, sample_every_s=0.05).start(["python"])
    page = browser_page
    try:
        off_loop(record, run, spec, 1, tracker)
        page.goto(f"{console_server}/runs/{run.pk}/")
        # The first page of the session parses plotly (4.8 MB): allow for a loaded machine (CI runs
        # two suites).
        page.wait_for_selector("#pool-timeline[data-steps='1']", timeout=60000)
        first_bands = int(page.get_attribute("#pool-timeline", "data-bands"))
        off_loop(record, run, spec, 2, tracker)
        page.wait_for_selector("#pool-timeline[data-steps='2']", timeout=10000)
    finally:
        tracker.close()
    chart = page.locator("#pool-timeline")
    assert chart.locator(".main-svg").count() > 0, "plotly did not draw"
    assert set(chart.get_attribute("data-phases").split(",")) == {
        "idle",
        "rollout",
        "grading",
        "update",
    }
    bands = int(chart.get_attribute("data-bands"))
    # step 1: idle (from the tracker's start), rollout, grading, update, idle; step 2 the same five,
    # its first idle merged into step 1's last: four more bands
    assert first_bands == 5 and bands == 9
    assert chart.locator(".shapelayer path").count() == bands  # the bands are in the SVG
    names = page.evaluate("document.getElementById('pool-timeline').data.map((t) => t.name)")
    assert names[:3] == ["pool (live slots)", "queue depth", "demand"]
    slots = page.evaluate(
        "document.getElementById('pool-timeline').data[0].y.filter((v) => v !== null)"
    )
    assert len(slots) == int(chart.get_attribute("data-samples")) > 6 and min(slots) > 0
    ARTIFACTS.mkdir(exist_ok=True)
    chart.screenshot(path=str(ARTIFACTS / "pool_timeline.png"))
    assert page.errors == []
