"""In a real browser: a drift alert raised while the run page is open appears live in the alert feed
and on the mean-reward chart; a curator acknowledges it with a note and a second (anonymous)
viewer sees the acknowledgement live; a repeat within the cool-down updates the same entry."""

import re
import time
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import sync_playwright

from core.events import broadcast_run_event
from tasks_library.models import TaskSet
from tests.browser import CHROMIUM, CHROMIUM_ARGS, browser_marks, off_loop
from tests.tasks_library.conftest import PASSWORD, make_user, roles  # noqa: F401 (fixture)
from training import services
from training.drift import AlertCandidate, DriftConfig
from training.models import Alert, StepMetric, TrainingRun
from training.selectors import step_event
from training.services import drift_step

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
BINS = [i / 10 for i in range(11)]
pytestmark = browser_marks()


@pytest.fixture
def watched_run(roles):
    """A running run with 30 recorded steps (64 Bernoulli(0.3) rewards each) and a curator."""
    run = TrainingRun.objects.create(
        task_set=TaskSet.objects.create(name="drifting"),
        total_steps=60,
        status=TrainingRun.RUNNING,
        config={"drift": {"cooldown_steps": 10}},
    )
    rng = np.random.default_rng(0)
    for step in range(1, 31):
        record_rewards(run.pk, step, (rng.random(64) < 0.3).astype(float), broadcast=False)
    make_user("cora", "curators")
    return run


def raise_alert(
    run_id: int,
    step: int,
    severity: str = "warning",
    detector: str = "page_hinkley_down",
    stream: str = "reward/mean",
):
    return services.alerts_raise(
        run_id=run_id,
        step=step,
        candidates=[
            AlertCandidate(
                step=step,
                stream=stream,
                detector=detector,
                statistic=13.4,
                threshold=12.0,
                window=24,
                severity=severity,
                message=f"{stream} drifted down: Page-Hinkley cumulative deviation 13.4σ > λ=12σ",
            )
        ],
    )


def record_rewards(run_id: int, step: int, rewards, broadcast: bool = True):
    """Record a step as training.services.step_record does (histogram, metrics), then tell
    watchers."""
    counts = np.bincount(np.minimum((rewards * 10).astype(int), 9), minlength=10).tolist()
    mean = float(rewards.mean())
    metric = StepMetric.objects.create(
        run_id=run_id,
        step=step,
        reward_mean=mean,
        reward_histogram=counts,
        reward_bins=BINS,
        metrics={"reward/mean": mean, "reward/pass_rate": mean},
    )
    if broadcast:
        broadcast_run_event(run_id, step_event(metric))


def train_on(run_id: int, steps: range, p: float, seed: int):
    """Steps whose rewards are Bernoulli(p), each followed by the trainer's drift hook."""
    rng = np.random.default_rng(seed)
    for step in steps:
        record_rewards(run_id, step, (rng.random(64) < p).astype(float))
        drift_step(run_id, step, DriftConfig(cooldown_steps=10))


def test_alert_appears_live_and_acknowledgement_reaches_other_viewers(console_server, watched_run):
    run = watched_run
    raise_alert(
        run.pk, 12, severity="info", detector="adwin", stream="reward/pass_rate"
    )  # before the page opens
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        curator = browser.new_context(viewport={"width": 1400, "height": 1100}).new_page()
        anonymous = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
        errors = []
        for page in (curator, anonymous):
            page.on("pageerror", lambda exc: errors.append(str(exc)))

        curator.goto(f"{console_server}/accounts/login/?next=/runs/{run.pk}/")
        curator.fill("#id_username", "cora")
        curator.fill("#id_password", PASSWORD)
        curator.click("#login-submit")
        for page in (curator, anonymous):
            if page is anonymous:
                page.goto(f"{console_server}/runs/{run.pk}/")
            page.wait_for_selector("#live-state:text('live')", timeout=15000)
            page.wait_for_selector("#reward-heatmap[data-steps='30']", timeout=10000)
            # the alert raised before the page opened came with the back-fill
            page.wait_for_selector("#alert-feed[data-count='1']", timeout=5000)
        assert curator.locator("#alert-feed").get_attribute("data-can-ack") == "1"
        assert anonymous.locator("#alert-feed").get_attribute("data-can-ack") == "0"

        # raised while both pages are open: appears live, newest first, on the chart too
        started = time.monotonic()
        [alert] = off_loop(raise_alert, run.pk, 27)
        for page in (curator, anonymous):
            page.wait_for_selector("#alert-feed[data-count='2']", timeout=5000)
        assert time.monotonic() - started < 5
        item = curator.locator(f"li[data-alert-id='{alert.pk}']")
        assert curator.locator("#alert-feed li").first.get_attribute("data-alert-id") == str(
            alert.pk
        )
        assert "sev-warning" in item.get_attribute("class")
        text = item.inner_text()
        for fragment in (
            "page_hinkley_down",
            "reward/mean",
            "step 27",
            "13.4",
            "12",
            "window 24 steps",
        ):
            assert fragment in text, (fragment, text)
        assert curator.locator("#alert-open").inner_text() == "2"
        curator.wait_for_selector("#reward-mean[data-alert-marks='2']", timeout=5000)
        shapes = curator.evaluate(
            "document.getElementById('reward-mean').layout.shapes.map(s => s.x0)"
        )
        assert sorted(shapes) == [12, 27]
        assert (
            anonymous.locator(f"li[data-alert-id='{alert.pk}'] form").count() == 0
        )  # no form for viewers

        # a repeat within the cool-down updates the same entry
        off_loop(raise_alert, run.pk, 31)
        off_loop(
            record_rewards, run.pk, 31, (np.random.default_rng(31).random(64) < 0.3).astype(float)
        )
        curator.wait_for_selector(f"li[data-alert-id='{alert.pk}'][data-repeats='1']", timeout=5000)
        assert "steps 27–31" in item.inner_text() and "repeated 1×" in item.inner_text()

        # acknowledging needs a note, then reaches the other viewer live
        item.locator("button.ack-button").click()
        assert (
            curator.locator(f"li[data-alert-id='{alert.pk}']").get_attribute("data-acknowledged")
            == "0"
        )
        item.locator("input[name=note]").fill(
            "Checked: the reward fell after the LR warm-up ended; watching"
        )
        item.locator("button.ack-button").click()
        curator.wait_for_selector(
            f"li[data-alert-id='{alert.pk}'][data-acknowledged='1']", timeout=5000
        )
        anonymous.wait_for_selector(
            f"li[data-alert-id='{alert.pk}'][data-acknowledged='1']", timeout=5000
        )
        assert (
            "acknowledged by cora"
            in anonymous.locator(f"li[data-alert-id='{alert.pk}']").inner_text()
        )
        assert "LR warm-up" in anonymous.locator(f"li[data-alert-id='{alert.pk}']").inner_text()
        # the time is written the console's one way, as the server writes it
        ack_time = anonymous.locator(f"li[data-alert-id='{alert.pk}'] .alert-ack time")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", ack_time.inner_text())
        assert curator.locator("#alert-open").inner_text() == "1"
        off_loop(
            raise_alert,
            run.pk,
            33,
            severity="critical",
            detector="onset:flag_rate_rising",
            stream="flags/rate",
        )
        curator.wait_for_selector("#alert-feed[data-count='3']", timeout=5000)

        # the real detectors through the trainer's hook: the reward moves from 0.3 to 0.55 at
        # step 32
        off_loop(train_on, run.pk, range(32, 56), 0.55, seed=1)
        curator.wait_for_selector("#step-count:text('55')", timeout=10000)
        raised = off_loop(
            lambda: list(
                Alert.objects.filter(run=run, step__gte=32).values_list("detector", flat=True)
            )
        )
        assert {"page_hinkley_up", "wasserstein"} <= set(raised), raised
        total = off_loop(lambda: Alert.objects.filter(run=run).count())
        assert total > 4
        curator.wait_for_selector(f"#alert-feed[data-count='{total}']", timeout=5000)
        curator.wait_for_timeout(500)  # let plotly finish the redraw before the picture
        curator.screenshot(path=str(ARTIFACTS / "alert_feed.png"), full_page=True)

        # a reload back-fills the same state
        anonymous.reload()
        anonymous.wait_for_selector(f"#alert-feed[data-count='{total}']", timeout=10000)
        assert (
            anonymous.locator(f"li[data-alert-id='{alert.pk}']").get_attribute("data-acknowledged")
            == "1"
        )
        assert errors == []
        browser.close()
