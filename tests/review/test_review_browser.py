"""In a real browser, from queue to label to feedback: a curator creates a review queue on a run
(one reviewer per item, so a curator must confirm what feeds back, as the queue page says), a
reviewer signs in and lands on their queue, opens the flagged item, reads its replay on the
labelling page, labels it "broken task" with the keyboard (3, a note, Ctrl+Enter) and moves on:
nothing is quarantined on one reviewer's word. The curator signs in, sees the label and confirms
it; the task version is then quarantined on its task page with both reasons, and the run's
review summary counts the label."""

from pathlib import Path

from tasks_library.models import TaskVersion
from tests.browser import browser_marks, off_loop
from tests.console.replay_seed import seed_group, seed_trajectory, seeded_run
from tests.review.review_seed import PASSWORD, make_roles, make_user

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


def seed(humaneval):
    make_roles()
    make_user("cora", "curator", password=PASSWORD)
    make_user("rita", "reviewer", password=PASSWORD)
    make_user("rex", "reviewer", password=PASSWORD)
    run, versions = seeded_run(humaneval, name="review-browser")
    group = seed_group(run, versions[0], step=2, group=0, size=3, turns=3)
    seed_trajectory(
        run,
        versions[1],
        step=3,
        group=1,
        reward=1.0,
        turns=2,
        monitors=[("llm:tiny", 0.55, "returns a constant")],
    )
    return run, versions, group


def log_in(page, server, name, then):
    page.goto(f"{server}/accounts/login/?next={then}")
    page.fill("#id_username", name)
    page.fill("#id_password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_url(f"{server}{then}")


def test_queue_to_label_to_feedback(console_server, browser_page, humaneval):
    run, versions, group = off_loop(seed, humaneval)
    page, server = browser_page, console_server
    flagged = group[0]  # test_tampering, monitor 0.92: first in a flagged-first queue

    # a curator creates the queue: flagged first, 3 items, one reviewer each, rita and rex
    log_in(page, server, "cora", "/review/")
    page.click("#new-queue-link")
    page.fill("#id_name", "flagged spot check")
    page.select_option("#id_run", str(run.pk))
    page.select_option("#id_strategy", "flagged_first")
    page.fill("#id_size", "3")
    page.fill("#id_reviewers_per_item", "1")
    page.select_option("#id_reviewers", label=["rex", "rita"])
    page.screenshot(path=str(ARTIFACTS / "review_queue_new.png"), full_page=True)
    page.click("#create-queue")
    page.wait_for_selector("#item-table")
    assert page.locator("#item-table tbody tr").count() == 3
    assert "only once a curator confirms" in page.locator("#consensus-rule").inner_text()
    first_row = page.locator("#item-table tbody tr").first
    assert (
        f"trajectory {flagged.pk}" in first_row.inner_text()
        and "test_tampering" in first_row.inner_text()
    )
    assignee = first_row.locator(".assignee").inner_text().strip()
    page.screenshot(path=str(ARTIFACTS / "review_queue.png"), full_page=True)
    page.click("header .user button")  # log out
    page.wait_for_url("**/accounts/login/")

    # the reviewer of the flagged item signs in and lands on their queue
    page.goto(f"{server}/accounts/login/")
    page.fill("#id_username", assignee)
    page.fill("#id_password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_selector("#item-table")
    assert page.url.startswith(f"{server}/review/queues/")
    page.goto(f"{server}/review/")
    assert page.locator("#my-queues .my-progress").first.inner_text().startswith("0/")
    page.screenshot(path=str(ARTIFACTS / "review_home.png"), full_page=True)
    page.locator("#my-queues a").first.click()
    page.wait_for_selector("#item-table")
    page.click(f"#item-table a.item-link:text('trajectory {flagged.pk}')")
    page.wait_for_selector("#label-form")
    assert "test_tampering" in page.locator("#flags").inner_text()
    assert "0.920" in page.locator("#item-reason").inner_text()
    assert (
        page.locator("#replay-link").get_attribute("href")
        == f"/runs/{run.pk}/trajectories/{flagged.pk}/"
    )
    # the replay is on the labelling page: its turns drawn, j moves to the next turn
    page.wait_for_selector("#turns section.turn[data-rendered='1']", timeout=10000)
    assert page.locator("#turns section.turn").count() == 3
    assert "I will tighten the comparison" in page.locator("#turn-1").inner_text()
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.wait_for_selector("#turn-2.selected", timeout=5000)
    page.screenshot(path=str(ARTIFACTS / "review_item.png"), full_page=True)

    # keyboard: 3 chooses "broken task"; it needs a note, so the note box takes the focus
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("3")
    assert page.locator("#label-broken_task").is_checked()
    assert page.evaluate("document.activeElement.id") == "id_note"
    assert "needs-note" in page.locator("#id_note").get_attribute("class")
    page.keyboard.type(
        "Hidden test 2 contradicts the docstring: 1.0 and 2.0 are 'close' at threshold 1.0"
    )
    page.screenshot(path=str(ARTIFACTS / "review_item_note.png"), full_page=True)
    item_url = page.url
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: url != item_url, timeout=10000)
    assert page.locator("#my-progress").inner_text() == (
        "your progress 1/2" if assignee == "rex" else "your progress 1/1"
    )
    message = page.locator(".messages li.success").inner_text()
    assert "labelled broken task" in message and "waits for a curator to confirm" in message
    page.screenshot(path=str(ARTIFACTS / "review_item_after.png"), full_page=True)
    assert not off_loop(lambda: TaskVersion.objects.get(pk=versions[0].pk).quarantined)

    # the reviewer turns the next item's trajectory into a task draft (keys typed in the form stay
    # there)
    page.click("#draft-panel summary")
    page.fill("#id_tests", "def check(candidate):\n    assert candidate([1.0, 1.5], 0.6) is True\n")
    page.screenshot(path=str(ARTIFACTS / "review_draft_form.png"), full_page=True)
    page.click("#draft-submit")
    page.wait_for_selector("#draft-status")
    assert page.locator("#draft-status").inner_text() == "draft"
    assert "candidate([1.0, 1.5], 0.6)" in page.locator("#draft-tests").inner_text()
    page.screenshot(path=str(ARTIFACTS / "review_draft.png"), full_page=True)

    # the curator signs in (landing on the task library), reads the label and confirms it
    page.click("header .user button")  # log out
    page.wait_for_url("**/accounts/login/")
    page.fill("#id_username", "cora")
    page.fill("#id_password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_url(f"{server}/tasks/")
    item_id = off_loop(lambda: flagged.review_items.values_list("pk", flat=True).get())
    page.goto(f"{server}/review/items/{item_id}/")
    assert "broken task × 1" in page.locator("#consensus-counts").inner_text()
    assert "Not decided yet" in page.locator("#consensus-state").inner_text()
    page.select_option("#confirm-label", "broken_task")
    page.fill("#confirm-note", "checked: the hidden test contradicts the docstring")
    page.click("#confirm-submit")
    page.wait_for_selector("#consensus-state:text('Decided')")
    assert "quarantined" in page.locator("#feedback").inner_text()
    page.screenshot(path=str(ARTIFACTS / "review_item_confirmed.png"), full_page=True)

    # feedback: the task version is quarantined on its task page, with both reasons
    version = off_loop(lambda: TaskVersion.objects.select_related("task").get(pk=versions[0].pk))
    assert version.quarantined and assignee in version.quarantine_reason
    page.goto(f"{server}/tasks/{version.task.task_id}/?v={version.number}")
    page.wait_for_selector("#quarantined")
    body = page.locator("body").inner_text()
    assert (
        f"that trajectory {flagged.pk}" in body
        and "Hidden test 2 contradicts the docstring" in body
        and "curator cora confirmed" in body
    )
    page.screenshot(path=str(ARTIFACTS / "review_task_quarantined.png"), full_page=True)

    # the run's review summary and the replay's review panel show it
    page.goto(f"{server}/runs/{run.pk}/review/")
    assert page.locator("#labels-by-kind tr[data-label='broken_task'] td.num").inner_text() == "1"
    assert (
        f"{version.task.task_id} v{version.number} confirmed by curator cora"
        in page.locator("#run-quarantines").inner_text()
    )
    page.screenshot(path=str(ARTIFACTS / "review_run_summary.png"), full_page=True)
    page.goto(f"{server}/runs/{run.pk}/trajectories/{flagged.pk}/")
    assert "broken_task × 1" in page.locator("#review-panel").inner_text()
    page.locator("#review-panel").screenshot(path=str(ARTIFACTS / "review_replay_panel.png"))
    assert page.errors == []
