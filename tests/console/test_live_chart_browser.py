"""In a real browser: the run page's plotly chart gains steps live over the websocket; the page's
plotly.js is the npm-pinned one, from the front-end bundle where npm is installed."""

import shutil
import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from core import frontend
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tasks_library.validation.pipeline import task_versions_validate
from tests.browser import CHROMIUM, CHROMIUM_ARGS, browser_marks, off_loop
from tests.training.rollouts import graded
from training import services
from training.config import RunConfig
from training.rollout import TaskSpec

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


@pytest.fixture
def running_run(humaneval):
    rows = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "entry_point": r["entry_point"],
            "reference_solution": r["canonical_solution"],
            "tests": r["test"],
            "where": "test",
        }
        for r in humaneval[:2]
    ]
    tasks_import(source="humaneval", task_set_name="live", records=rows)
    task_set = task_set_get(name="live")
    versions = list(task_set_versions(task_set=task_set))
    task_versions_validate(versions=versions)
    run = services.run_create(task_set=task_set, config=RunConfig.from_dict({"steps": 5}))
    services.run_transition(run_id=run.pk, to_status="launching")
    services.run_transition(run_id=run.pk, to_status="running")
    spec = TaskSpec(
        task_version_id=versions[0].pk,
        prompt=versions[0].prompt,
        entry_point=versions[0].entry_point,
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    return run, spec


def record_step(run, spec, step: int, rewards: list[float]):
    rollouts = [
        graded(spec, i, r, tests_total=4, tests_passed=int(r * 4)) for i, r in enumerate(rewards)
    ]
    services.step_record(
        run_id=run.pk, step=step, rollouts=rollouts, metrics={"reward/pass_rate": 0.5}
    )


def test_chart_gains_steps_live_and_backfills_on_reload(console_server, running_run):
    run, spec = running_run
    record_step(run, spec, 1, [0.0, 0.25, 0.5, 1.0])
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 700})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on(  # a script or style the Content-Security-Policy blocks: only the console says
            "console",
            lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        sockets = []
        page.on("websocket", lambda ws: sockets.append(ws))
        scripts = []
        page.on(
            "response",
            lambda r: scripts.append(r.url) if r.request.resource_type == "script" else None,
        )
        page.goto(f"{console_server}/runs/{run.pk}/")
        page.wait_for_selector("#live-state:text('live')", timeout=15000)
        page.wait_for_selector("#reward-heatmap[data-steps='1']", timeout=10000)
        assert page.locator("#reward-heatmap .main-svg").count() > 0, "plotly did not draw"
        assert_plotly_from_the_bundle(page, console_server, scripts)

        for step, rewards in ((2, [0.5, 0.5, 0.75, 1.0]), (3, [1.0, 1.0, 0.75, 1.0])):
            started = time.monotonic()
            off_loop(record_step, run, spec, step, rewards)
            page.wait_for_selector(f"#reward-heatmap[data-steps='{step}']", timeout=5000)
            assert time.monotonic() - started < 5
        assert page.locator("#step-count").inner_text() == "3"
        # An idle socket stays open (channels_redis blocks 5 s per read on Redis).
        page.wait_for_timeout(12000)
        assert len(sockets) == 1 and page.locator("#live-state").inner_text() == "live", (
            "the websocket dropped"
        )
        heat = page.evaluate("document.getElementById('reward-heatmap').data[0]")
        assert heat["x"] == [1, 2, 3]
        assert [row[2] for row in heat["customdata"]] == [
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            3,
        ]  # step 3: one 0.75, three 1.0

        off_loop(services.run_transition, run_id=run.pk, to_status="succeeded", reason="done")
        page.wait_for_selector("#run-status:text('succeeded')", timeout=5000)
        page.screenshot(path=str(ARTIFACTS / "run_live.png"), full_page=True)

        page.reload()
        page.wait_for_selector("#reward-heatmap[data-steps='3']", timeout=10000)
        assert errors == []
        browser.close()


def assert_plotly_from_the_bundle(page, server: str, scripts: list[str]) -> None:
    """plotly.js is the npm pin; where npm is installed (CI installs it) it came from the build's
    chunk (frontend/dist), and the plotly wheel's copy was not loaded at all."""
    assert page.evaluate("Plotly.version") == frontend.npm_pin()
    if shutil.which("npm") is None:
        assert f"{server}/static/plotly/plotly.min.js" in scripts, scripts
        return
    info = frontend.build_info()
    assert info is not None and frontend.build_outdated() is None, (
        "npm is installed but there is no current build"
    )
    assert f"{server}/static/{info['plotly_chunk']}" in scripts, scripts
    assert f"{server}/static/console/run_live.js" in scripts
    assert not any("/static/plotly/" in url or "/static/fallback/" in url for url in scripts), (
        scripts
    )
    assert page.locator("script[type=importmap]").count() == 0


def test_a_dropped_websocket_reconnects_and_backfills_what_it_missed(
    console_server, running_run, browser_page
):
    """The socket is closed under the page; the steps recorded while it is down arrive after it
    reconnects, asked for with ``after=`` the last step drawn, and none is drawn twice."""
    run, spec = running_run
    off_loop(
        record_step, run, spec, 1, [0.0, 0.5, 1.0, 1.0]
    )  # Playwright's loop runs in this thread
    page = browser_page
    # Keep a handle on the page's sockets so the test can drop them (the page does not expose its
    # own).
    page.add_init_script(
        """
        window.__sockets = [];
        const Native = window.WebSocket;
        window.WebSocket = function (...args) {"""
        """ const s = new Native(...args); window.__sockets.push(s); return s; };
        window.WebSocket.prototype = Native.prototype;
    """
    )
    urls = []
    page.on("websocket", lambda ws: urls.append(ws.url))
    page.goto(f"{console_server}/runs/{run.pk}/")
    page.wait_for_selector("#reward-heatmap[data-steps='1']", timeout=15000)
    page.evaluate("window.__sockets.forEach((s) => s.close())")
    page.wait_for_selector("#live-state:text('reconnecting…')", timeout=5000)
    for step in (2, 3):
        off_loop(record_step, run, spec, step, [0.25, 0.5, 0.75, 1.0])
    page.wait_for_selector("#reward-heatmap[data-steps='3']", timeout=15000)
    page.wait_for_selector("#live-state:text('live')", timeout=15000)
    assert len(urls) >= 2 and urls[0].endswith("after=0") and urls[1].endswith("after=1"), urls
    heat = page.evaluate("document.getElementById('reward-heatmap').data[0]")
    assert heat["x"] == [1, 2, 3]
    assert page.errors == []
