"""In a real browser: the run page's reward distribution (ridgeline and violins, total and per
component) follows a step slider and live steps; a long run's back-fill comes decimated and the
slider still reaches its oldest steps; the sandbox pool panel fills from the real workers; the
comparison page draws two runs on shared axes. Screenshots go to test-artifacts/."""

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from core.events import broadcast_run_event
from sandboxes import queue as Q
from tests.browser import CHROMIUM, CHROMIUM_ARGS, browser_marks, off_loop
from tests.console.test_dashboard_views import add_steps, make_run, task_version
from training.models import HeldOutEvaluation, StepMetric
from training.selectors import step_event

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


@pytest.fixture
def runs():
    """Run A: 40 steps with two reward components and held-out evaluations; run B: 25 steps;
    run C: 720 steps (more than the back-fill sends in full)."""
    version = task_version()
    a, b, c = make_run("ridges-a"), make_run("ridges-b"), make_run("ridges-c")
    add_steps(a, version, range(1, 41))
    add_steps(b, version, range(1, 26))
    add_steps(c, version, range(1, 721))
    for step, p1 in ((10, 0.2), (20, 0.35), (30, 0.5), (40, 0.55)):
        HeldOutEvaluation.objects.create(
            run=a,
            step=step,
            task_set=a.task_set,
            tasks=8,
            samples_per_task=4,
            pass_at_k={"1": p1, "4": min(1.0, 2 * p1)},
            reward_mean=p1 + 0.1,
        )
    return a, b, c, version


def dist(page) -> dict:
    return page.evaluate("({...document.getElementById('reward-dist').dataset})")


def test_ridgeline_violin_slider_pool_panel_and_compare_page(console_server, runs):
    a, b, c, version = runs
    # a few executions, so that the pool panel has latencies and statuses to show
    square = "def square(x):\n    return x * x\n"
    Q.run_many(
        [
            Q.python_tests(
                square if i % 3 else "def square(x):\n    return x\n",
                "def check(candidate):\n    assert candidate(3) == 9\n",
                "square",
            )
            for i in range(6)
        ]
    )
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{console_server}/runs/{a.pk}/")
        page.wait_for_selector("#live-state:text('live')", timeout=15000)
        page.wait_for_selector("#reward-heatmap[data-steps='40']", timeout=10000)
        page.wait_for_selector("#reward-dist .main-svg", timeout=5000)
        state = dist(page)
        assert (
            state["mode"] == "ridgeline"
            and state["last"] == "40"
            and state["first"] == "31"
            and state["ridges"] == "10"
        )
        # the components came with the back-fill
        options = page.eval_on_selector_all("#dist-component option", "os => os.map(o => o.value)")
        assert options == ["", "correctness", "efficiency"]

        # the slider moves the window back; the newest box unticks itself
        page.locator("#dist-slider").fill("19")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.last === '20'", timeout=5000
        )
        assert dist(page)["first"] == "11" and not page.locator("#dist-follow").is_checked()
        assert page.locator("#dist-step").inner_text() == "step 20"

        # per component: the ridges redraw from that component's bins
        page.select_option("#dist-component", "efficiency")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.component === 'efficiency'",
            timeout=5000,
        )
        traces = page.evaluate("document.getElementById('reward-dist').data.length")
        assert traces == 21  # a ridge and its hover points per step, and the means
        page.locator("#reward-dist").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.locator("#dist-box").screenshot(path=str(ARTIFACTS / "dashboard_ridgeline.png"))

        # violins of the same window
        page.select_option("#dist-mode", "violin")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.mode === 'violin'", timeout=5000
        )
        page.select_option("#dist-window", "16")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.ridges === '16'", timeout=5000
        )
        assert dist(page)["last"] == "20"
        page.wait_for_timeout(300)
        page.locator("#dist-box").screenshot(path=str(ARTIFACTS / "dashboard_violin.png"))

        # a live step: the window stays where the user put it, then "newest" follows it
        off_loop(add_steps, a, version, [41])

        off_loop(
            lambda: broadcast_run_event(a.pk, step_event(StepMetric.objects.get(run=a, step=41)))
        )
        page.wait_for_selector("#step-count:text('41')", timeout=5000)
        assert dist(page)["last"] == "20"
        page.locator("#dist-follow").check()
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.last === '41'", timeout=5000
        )
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.ridges === '16'", timeout=5000
        )

        # the new curves: held-out pass@1 on the mean-reward chart, loss, flag rate, tokens/s
        names = page.evaluate("document.getElementById('reward-mean').data.map(t => t.name)")
        assert "held-out pass@1" in names
        pass1 = page.evaluate(
            "document.getElementById('reward-mean').data.find(t => t.name === 'held-out pass@1')"
        )
        assert pass1["x"] == [10, 20, 30, 40] and pass1["y"] == [0.2, 0.35, 0.5, 0.55]
        rate = page.evaluate("document.getElementById('tokens-rate').data[0].y")
        assert rate[0] == pytest.approx(400 / 2.0)  # tokens/generated over the summed time split
        assert page.evaluate("document.getElementById('flag-rate').data[0].y[0]") == pytest.approx(
            0.125
        )
        assert page.evaluate("document.getElementById('loss-policy').data[0].y.length") == 41

        # the sandbox pool panel, from the session's real workers
        page.wait_for_selector("#sandbox-pool:not([data-updates='0'])", timeout=10000)
        assert page.locator("#pool-rows tr[data-runtime='python']").count() == 1
        alive = page.evaluate(
            "Number(document.querySelector(\"#pool-rows tr[data-runtime='python'] "
            '.pool-busy").textContent) + Number(document.querySelector("#pool-rows '
            "tr[data-runtime='python'] .pool-idle\").textContent)"
        )
        assert alive >= 1
        page.wait_for_selector(
            "#pool-rows tr[data-runtime='python'] .pool-status[data-status='ok']", timeout=10000
        )
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "dashboard_run.png"), full_page=True)

        # a long run: the back-fill comes decimated, the slider still reaches step 1, and a
        # component of a summed bucket is read from the components API
        page.goto(f"{console_server}/runs/{c.pk}/")
        page.wait_for_selector("#reward-heatmap[data-steps='720']", timeout=15000)
        events = int(page.locator("#reward-heatmap").get_attribute("data-events"))
        assert events == 300 + 210  # the newest 300 in full, 420 older steps in buckets of 2
        assert (
            page.locator("#backfill-note").is_visible()
            and "buckets of 2 steps" in page.locator("#backfill-note").inner_text()
        )
        page.select_option("#dist-component", "correctness")
        page.locator("#dist-slider").fill("0")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.first === '1' && "
            "document.getElementById('reward-dist').dataset.ridges === '1'",
            timeout=5000,
        )
        page.select_option("#dist-window", "24")
        page.locator("#dist-slider").fill("30")
        page.wait_for_function(
            "() => document.getElementById('reward-dist').dataset.ridges === '24'", timeout=10000
        )
        page.wait_for_timeout(300)
        page.locator("#dist-box").screenshot(path=str(ARTIFACTS / "dashboard_decimated.png"))

        # two runs on shared axes
        page.goto(f"{console_server}/runs/compare/?runs={a.pk},{b.pk}")
        page.wait_for_selector("#compare-charts[data-drawn='1']", timeout=10000)
        for chart in (
            "cmp-reward-mean",
            "cmp-pass-rate",
            "cmp-heldout",
            "cmp-flag-rate",
            "cmp-entropy",
            "cmp-kl",
        ):
            assert page.locator(f"#{chart}").get_attribute("data-traces") == "2", chart
        colours = page.evaluate(
            "document.getElementById('cmp-entropy').data.map(t => t.line.color)"
        )
        assert len(set(colours)) == 2
        lengths = page.evaluate("document.getElementById('cmp-kl').data.map(t => t.x.length)")
        assert lengths == [41, 25]
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "dashboard_compare.png"), full_page=True)

        # from the run list: tick two runs, compare
        page.goto(f"{console_server}/")
        page.check(f"input[name=run][value='{b.pk}']")
        page.check(f"input[name=run][value='{c.pk}']")
        page.click("#compare-submit")
        page.wait_for_selector("#compare-charts[data-drawn='1']", timeout=10000)
        assert page.locator("#compare-legend li").count() == 2
        assert errors == []
        browser.close()
