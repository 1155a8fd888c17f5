"""In a real browser: the runs table sorts by a metric column and filters by a tag and a range,
then two ticked runs open the comparison, which shows their configuration differences side by side
and names each series for what it is (a total with a quality share is not plotted as if it were
correctness, which has a chart of its own). Screenshots go to test-artifacts/."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tasks_library.models import TaskSet
from tests.browser import browser_marks
from training.models import StepMetric, TrainingRun

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


def make(name, tags, weights, lr, rewards, status="succeeded", minutes=20):
    task_set, _ = TaskSet.objects.get_or_create(name="humaneval-demo")
    now = timezone.now()
    run = TrainingRun.objects.create(
        task_set=task_set,
        name=name,
        description=f"{name}: lr {lr}",
        tags=tags,
        launched_by="otto",
        status=status,
        total_steps=len(rewards),
        config={"lr": lr, "group_size": 8, "reward_weights": weights},
        started_at=now - timedelta(minutes=minutes),
        finished_at=now if status != "running" else None,
    )
    StepMetric.objects.bulk_create(
        StepMetric(
            run=run,
            step=i + 1,
            reward_mean=r,
            metrics={
                "reward/mean": r,
                "reward/correctness": r * 0.8,
                "reward/pass_rate": r / 2,
                "loss/kl": 0.01 * i,
            },
        )
        for i, r in enumerate(rewards)
    )
    return run


@pytest.fixture
def runs():
    quality = make(
        "quality share", ["sweep"], {"correctness": 1.0, "quality": 0.2}, 1e-4, [0.2, 0.5, 0.7]
    )
    plain = make("plain", ["sweep"], {"correctness": 1.0}, 3e-4, [0.1, 0.3, 0.4, 0.45])
    other = make("smoke test", ["smoke"], {"correctness": 1.0}, 1e-4, [0.05], status="running")
    return quality, plain, other


def shown_ids(page) -> list[int]:
    return [
        int(i)
        for i in page.eval_on_selector_all(
            "#runs-table tbody tr[data-run-id]", "rows => rows.map(r => r.dataset.runId)"
        )
    ]


def test_sort_filter_select_and_compare(runs, console_server, browser_page):
    quality, plain, other = runs
    page = browser_page
    page.goto(f"{console_server}/")
    page.wait_for_selector("#runs-table")
    assert shown_ids(page) == [other.pk, plain.pk, quality.pk]  # newest first
    assert "quality share" in page.inner_text("#runs-table") and "otto" in page.inner_text(
        "#runs-table"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "runs_table.png"), full_page=True)

    # sort by the best mean reward, highest first
    page.click("th[data-column='reward/mean:best'] a")
    page.wait_for_selector("th[data-column='reward/mean:best'].sorted")
    assert shown_ids(page) == [quality.pk, plain.pk, other.pk]
    # filter: the sweep tag, a best mean reward above 0.42
    page.fill("#filter-tag", "sweep")
    page.fill("input[name='f.reward/mean:best']", ">0.42")
    page.keyboard.press("Enter")
    page.wait_for_url("**f.reward%2Fmean%3Abest=%3E0.42**")
    assert shown_ids(page) == [quality.pk, plain.pk]
    page.screenshot(path=str(ARTIFACTS / "runs_table_filtered.png"), full_page=True)

    # tick both, compare
    assert page.locator("#compare-submit").is_disabled()
    page.check(f"input.run-pick[value='{quality.pk}']")
    page.check(f"input.run-pick[value='{plain.pk}']")
    assert page.inner_text("#selected-count") == "2 selected"
    page.click("#compare-submit")
    page.wait_for_selector("#compare-charts[data-drawn='1']", timeout=10000)
    differing = page.eval_on_selector_all(
        "#config-differences tbody tr", "rows => rows.map(r => r.dataset.key)"
    )
    assert set(differing) == {"steps", "lr", "reward_weights.quality"}, differing
    quality_row = page.inner_text("#config-differences tr[data-key='reward_weights.quality']")
    assert "0.2" in quality_row and "not set" in quality_row
    assert page.locator("#rewards-differ").is_visible()
    names = page.evaluate("document.getElementById('cmp-reward-mean').data.map(t => t.name)")
    assert names == [
        f"run {quality.pk}: (correctness×1 + quality×0.2) / 1.2",
        f"run {plain.pk}: correctness",
    ], names
    correctness = page.evaluate("document.getElementById('cmp-correctness').data.map(t => t.y)")
    assert correctness[0] == pytest.approx([0.16, 0.4, 0.56])
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / "runs_compare.png"), full_page=True)
    assert page.errors == []
