"""In a real browser, the console as a machine without Node serves it: the unbundled page scripts
(ES modules) find plotly.js through the page's import map, which points at the plotly wheel's copy
of the npm-pinned version; the run page and the comparison page draw, with no script error."""

from __future__ import annotations

from core import frontend
from tests.browser import browser_marks, off_loop
from tests.console.test_dashboard_views import add_steps, make_run, task_version

pytestmark = browser_marks()


def seed():
    version = task_version()
    a, b = make_run("fallback-a"), make_run("fallback-b")
    add_steps(a, version, range(1, 6))
    add_steps(b, version, range(1, 4))
    return a, b


def test_unbundled_console_draws_with_the_wheels_plotly(console_server_unbundled, browser_page):
    a, b = off_loop(seed)
    page, server = browser_page, console_server_unbundled
    scripts = []
    page.on(
        "response",
        lambda r: (
            scripts.append((r.url, r.status)) if r.request.resource_type == "script" else None
        ),
    )

    page.goto(f"{server}/runs/{a.pk}/")
    page.wait_for_selector("#reward-heatmap[data-steps='5'] .main-svg", timeout=15000)
    assert page.evaluate("Plotly.version") == frontend.npm_pin()
    urls = {url: status for url, status in scripts}
    for path in (
        "console/run_live.js",
        "console/pool.js",
        "fallback/plotly.js",
        "plotly/plotly.min.js",
    ):
        assert urls.get(f"{server}/static/{path}") == 200, (path, urls)
    assert not any("/chunks/" in url for url in urls), "unbundled: nothing from frontend/dist"
    source = page.evaluate(f"fetch('{server}/static/console/run_live.js').then((r) => r.text())")
    assert 'import Plotly from "plotly.js-dist-min"' in source, (
        "the source module itself, not a bundle"
    )

    page.goto(f"{server}/runs/compare/?runs={a.pk},{b.pk}")
    page.wait_for_selector("#compare-charts[data-drawn='1']", timeout=10000)
    assert page.evaluate("document.getElementById('cmp-reward-mean').data.length") == 2, (
        "one curve per run"
    )
    assert page.errors == []
