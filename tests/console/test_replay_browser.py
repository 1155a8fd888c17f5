"""In a real browser: the trajectory replay's keys move between turns and to the next trajectory
of the group, and a trajectory of 1,000 turns opens at once with its last turn a key press away."""

import time
from pathlib import Path

from tests.browser import browser_marks, off_loop
from tests.console.replay_seed import seed_group, seed_trajectory, seeded_run

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


def selected_turn(page) -> int:
    return page.evaluate("Number(document.querySelector('section.turn.selected').id.split('-')[1])")


def in_view(page, n: int) -> bool:
    return page.evaluate(
        f"(() => {{ const r = document.getElementById('turn-{n}').getBoundingClientRect();\n"
        "        return r.top >= -2 && r.top < window.innerHeight / 2; })()"
    )


def test_keys_move_between_turns_and_trajectories_of_the_group(
    console_server, browser_page, humaneval
):
    run, versions = off_loop(seeded_run, humaneval)
    group = off_loop(seed_group, run, versions[0], step=2, group=0, size=3, turns=6)
    off_loop(
        seed_trajectory,
        run,
        versions[1],
        step=3,
        group=1,
        reward=0.1,
        status="timeout",
        turns=1,
        flags=["rollout_timeout"],
    )
    page = browser_page
    # from the run page to its trajectory list, sorted by reward, to the best one's replay
    page.goto(f"{console_server}/runs/{run.pk}/")
    page.click("#trajectories-link")
    page.wait_for_selector("#trajectory-table")
    page.click("#sort-reward")
    page.wait_for_url("**sort=-reward**")
    assert page.locator("#trajectory-table tbody tr").count() == 4
    page.screenshot(path=str(ARTIFACTS / "trajectory_list.png"))
    page.locator("#trajectory-table tbody tr").first.locator("a").first.click()
    url = f"{console_server}/runs/{run.pk}/trajectories/{group[0].pk}/"
    page.wait_for_url(url)
    page.wait_for_selector("#turn-1[data-rendered]", timeout=10000)
    page.screenshot(path=str(ARTIFACTS / "replay_header.png"))

    page.keyboard.press("j")
    assert selected_turn(page) == 1
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert (
        selected_turn(page) == 3
        and page.evaluate("location.hash") == "#turn-3"
        and in_view(page, 3)
    )
    page.keyboard.press("k")
    assert selected_turn(page) == 2
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert selected_turn(page) == 4 and in_view(page, 4)
    page.keyboard.press("ArrowUp")
    assert selected_turn(page) == 3
    page.wait_for_selector("#turn-3[data-rendered]")
    # the diff is drawn coloured, the long stdout of turn 3 starts collapsed with its truncation
    # shown
    turn3 = page.locator("#turn-3")
    assert (
        turn3.locator("pre.diff .d-add").count() >= 2
        and turn3.locator("pre.diff .d-del").count() >= 2
    )
    assert turn3.locator("details.stream-stdout").get_attribute("open") is None
    assert "truncated by the sandbox" in turn3.locator("details.stream-stdout summary").inner_text()
    assert turn3.locator(".tests-table tbody tr").count() == 3
    page.screenshot(path=str(ARTIFACTS / "replay_turn.png"))
    page.keyboard.press("G")
    assert selected_turn(page) == 6
    page.keyboard.press("g")
    assert selected_turn(page) == 1 and in_view(page, 1)

    page.keyboard.press("n")
    page.wait_for_url(f"**/trajectories/{group[1].pk}/", timeout=10000)
    page.wait_for_selector("#turn-1[data-rendered]", timeout=10000)
    page.keyboard.press("n")
    page.wait_for_url(f"**/trajectories/{group[2].pk}/", timeout=10000)
    page.wait_for_selector("body[data-replay-ready]")
    page.keyboard.press("n")  # the last of the group: nowhere to go
    page.wait_for_timeout(300)
    assert page.url.endswith(f"/trajectories/{group[2].pk}/")
    page.keyboard.press("p")
    page.wait_for_url(f"**/trajectories/{group[1].pk}/", timeout=10000)

    # a shared link to a turn opens on it
    page.goto(f"{url}#turn-5")
    page.wait_for_selector("#turn-5[data-rendered]", timeout=10000)
    assert selected_turn(page) == 5 and in_view(page, 5)
    assert page.errors == []


def test_a_thousand_turn_trajectory_opens_at_once_and_its_last_turn_is_reachable(
    console_server, browser_page, humaneval
):
    run, versions = off_loop(seeded_run, humaneval)
    long = off_loop(
        seed_trajectory,
        run,
        versions[0],
        step=1,
        turns=1000,
        flags=["rollout_timeout"],
        evidence={"rollout_timeout": "1000 turns in 300.0 s"},
        monitors=[("rules", 0.4, "no hack detector fired")],
    )
    page = browser_page
    started = time.monotonic()
    page.goto(f"{console_server}/runs/{run.pk}/trajectories/{long.pk}/", wait_until="commit")
    page.wait_for_selector("#turn-1[data-rendered]", timeout=10000)
    first_render = time.monotonic() - started
    page.screenshot(path=str(ARTIFACTS / "replay_1000_top.png"))

    started = time.monotonic()
    page.keyboard.press("G")
    page.wait_for_selector("#turn-1000.selected[data-rendered]", timeout=10000)
    page.wait_for_function(
        "() => document.getElementById('turn-1000').getBoundingClientRect().top < innerHeight / 2"
    )
    jump = time.monotonic() - started
    rendered = page.locator("section.turn[data-rendered]").count()
    nav = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " return [n.responseStart, n.responseEnd, n.domContentLoadedEventEnd, n.transferSize]; })()"
    )
    print(
        f"\n1,000-turn trajectory: first turn drawn {first_render * 1000:.0f} ms after navigation "
        f"(page: first byte {nav[0]:.0f} ms, last byte {nav[1]:.0f} ms, DOMContentLoaded "
        f"{nav[2]:.0f} ms, "
        f"{nav[3] / 1024:.0f} KiB); G to turn 1000 drawn and in view in {jump * 1000:.0f} ms; "
        f"{rendered} of 1000 turns drawn"
    )
    assert first_render < 3 and jump < 3
    assert rendered < 120, "turns were drawn that nobody scrolled to"
    assert (
        page.locator("#turn-1000 .turn-body pre.code, #turn-1000 .turn-body pre.diff").count() >= 1
    )
    assert page.evaluate("location.hash") == "#turn-1000"
    page.screenshot(path=str(ARTIFACTS / "replay_1000_last.png"))

    # back up by keys across a chunk edge, then to a long output and its "show all"
    for _ in range(2):
        page.keyboard.press("k")
    assert selected_turn(page) == 998
    page.wait_for_selector("#turn-998[data-rendered]", timeout=10000)
    stdout = page.locator("#turn-999 details.stream-stdout")  # index 998: a 300-line stdout
    page.wait_for_selector("#turn-999[data-rendered]", timeout=10000)
    assert stdout.get_attribute("open") is None
    stdout.locator("summary").click()
    pre = stdout.locator("pre")
    assert pre.inner_text().count("\n") < 210
    stdout.locator("button.show-all").click()
    assert pre.inner_text().count("\n") >= 299
    page.keyboard.press("g")
    assert selected_turn(page) == 1 and in_view(page, 1)
    # a link to a turn in the middle: it stays in place while the turns around it are drawn
    page.evaluate("location.hash = '#turn-500'")
    page.wait_for_selector("#turn-500.selected[data-rendered]", timeout=10000)
    page.wait_for_selector("#turn-499[data-rendered]", timeout=10000)
    page.wait_for_timeout(300)
    assert in_view(page, 500)
    page.keyboard.press("j")
    assert selected_turn(page) == 501 and in_view(page, 501)
    assert page.errors == []
