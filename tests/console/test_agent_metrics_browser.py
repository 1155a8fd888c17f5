"""In a real browser: an agent run's page charts its agent metrics (how trajectories ended, parse
errors, calls per tool, turns) and its training signal (tokens trained, groups without
advantage), lists its warnings, and charts any metric it records picked by name, growing live;
the compare page overlays any picked metric of several runs, one chart per metric."""

from pathlib import Path

from tests.browser import browser_marks, off_loop
from tests.training.conftest import one_task_run
from tests.training.test_step_record_nul_text import rollout_with_nul
from training import services

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()


def agent_metrics(step: int) -> dict:
    trained = 0 if step in (1, 2) else 300 + 40 * step
    return {
        "reward/pass_rate": min(1.0, 0.1 * step),
        "agent/turns_mean": 6.0 - 0.4 * step,
        "agent/tool_calls_mean": 5.0 - 0.3 * step,
        "agent/submitted": 2 + step,
        "agent/truncated": max(0, 4 - step),
        "agent/max_turns": 2 if step < 4 else 1,
        "agent/timeout": 1 if step == 3 else 0,
        "agent/parse_errors": max(0, 6 - step),
        "agent/calls_bash": 10 - step,
        "agent/calls_file_editor": 6 + step,
        "agent/calls_run_tests": 4,
        "agent/calls_submit": 2 + step,
        "tokens/trained": trained,
        "groups/zero_advantage": 4 if trained == 0 else 1,
        "groups/total": 4,
        "sampler/groups_skipped": step,
    }


def seed():
    agent = one_task_run(rollout_mode="agent", steps=10)
    plain = one_task_run(steps=10)
    for run, metrics in ((agent, agent_metrics), (plain, lambda s: {"reward/pass_rate": 0.05 * s})):
        version = run.task_versions.get().pk
        for step in range(1, 7):
            services.step_record(
                run_id=run.pk,
                step=step,
                rollouts=[rollout_with_nul(version)],
                metrics=metrics(step),
            )
    return agent, plain


def test_agent_charts_warnings_and_picked_metrics(console_server, browser_page):
    agent, plain = off_loop(seed)
    page = browser_page
    page.goto(f"{console_server}/runs/{agent.pk}/")
    page.wait_for_selector("#reward-heatmap[data-steps='6']", timeout=15000)
    page.wait_for_selector("#agent-episodes[data-traces='4']", timeout=10000)
    assert page.get_attribute("#agent-tools", "data-tools") == ",".join(
        f"agent/calls_{t}" for t in ("bash", "file_editor", "run_tests", "submit")
    )
    assert page.get_attribute("#training-signal", "data-zero-token-steps") == "2"
    assert not page.locator("#warnings").is_hidden()
    warnings = page.locator("#warning-list li")
    assert sorted(warnings.evaluate_all("items => items.map(i => i.dataset.warning)")) == [
        "no_tokens_trained",
        "zero_advantage",
    ]
    assert (
        "steps 1–2, 2 in all" in page.locator("li[data-warning='no_tokens_trained']").inner_text()
    )

    page.select_option("#metric-select", "agent/calls_bash")
    page.click("#metric-add")
    page.wait_for_selector("#picked-metrics[data-traces='1'][data-points='6']", timeout=10000)
    page.select_option("#metric-select", "tokens/trained")
    page.click("#metric-add")
    page.wait_for_selector("#picked-metrics[data-traces='2'][data-points='12']", timeout=10000)
    assert "metric=agent%2Fcalls_bash&metric=tokens%2Ftrained" in page.url

    def one_more_step():
        version = agent.task_versions.get().pk
        services.step_record(
            run_id=agent.pk, step=7, rollouts=[rollout_with_nul(version)], metrics=agent_metrics(7)
        )

    off_loop(one_more_step)
    page.wait_for_selector("#picked-metrics[data-points='14']", timeout=10000)  # live
    page.click("#metric-chips button[data-metric='tokens/trained']")
    page.wait_for_selector("#picked-metrics[data-traces='1']")
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.locator("#warnings").screenshot(path=str(SCREENS / "run_warnings.png"))
    page.locator(".charts").screenshot(path=str(SCREENS / "run_agent_charts.png"))

    page.goto(
        f"{console_server}/runs/compare/?runs={agent.pk},{plain.pk}&metric=agent/calls_file_editor"
    )
    page.wait_for_selector("#cmp-picked[data-charts='1'] .chart[data-traces='1']", timeout=10000)
    title = page.locator("#cmp-picked .chart .gtitle").text_content()
    assert title == f"agent/calls_file_editor (none for run {plain.pk})"
    page.select_option("#cmp-metric-select", "reward/pass_rate")
    page.click("#cmp-metric-add")
    page.wait_for_selector("#cmp-picked[data-charts='2']", timeout=10000)
    assert (
        page.locator("#cmp-picked .chart[data-metric='reward/pass_rate']").get_attribute(
            "data-traces"
        )
        == "2"
    )
    page.locator("#picked-compare").screenshot(path=str(SCREENS / "compare_picked_metrics.png"))
    assert page.errors == []
