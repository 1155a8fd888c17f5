"""In a real browser, on the labelling page: a label key chooses the label and nothing more (it
once filed the label at once, with no note or turn, and moved to the next item, where the note
typed next answered 400); the note box takes the focus, a click on a turn of the replay makes it
the label's "at turn", and Ctrl+Enter sends all three."""

from pathlib import Path

from console.review import models as m
from console.review.services import review_queue_create
from tests.browser import browser_marks, off_loop
from tests.console.replay_seed import seed_group, seeded_run
from tests.review.review_seed import PASSWORD, make_roles, make_user

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()


def seed(humaneval):
    make_roles()
    rita = make_user("rita", "reviewer", password=PASSWORD)
    run, versions = seeded_run(humaneval, name="keys")
    seed_group(run, versions[0], step=1, group=0, size=2, turns=3)
    queue = review_queue_create(
        name="keys",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=2,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=make_user("cora", "curator"),
    )
    return list(queue.items.order_by("position"))


def test_a_key_chooses_a_click_picks_the_turn_and_ctrl_enter_sends(
    console_server, browser_page, humaneval
):
    items = off_loop(seed, humaneval)
    page = browser_page
    page.goto(f"{console_server}/accounts/login/?next=/review/items/{items[0].pk}/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_selector("#turns section.turn[data-rendered='1']", timeout=10000)
    page.evaluate("window.stillTheSamePage = true")

    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("1")  # "correct": needs no note, and is still not sent
    assert page.locator("#label-correct").is_checked()
    assert page.evaluate("document.activeElement.id") == "id_note"
    page.wait_for_timeout(500)
    assert page.evaluate("window.stillTheSamePage === true")
    assert off_loop(lambda: m.ReviewLabel.objects.count()) == 0
    page.keyboard.type("reads the spec, then fixes the bound; 2 and 3 are fine")

    page.locator("#turn-2 h2").click()  # the header of turn 2 picks it
    assert page.input_value("#id_turn") == "2"
    assert page.inner_text("#turn-picked") == "turn 2, picked on the replay"
    page.locator("#turn-index .cell[data-pos='2']").click()  # its index cell too
    assert page.input_value("#id_turn") == "3"
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "review_label_turn_picked.png"), full_page=False)

    page.locator("#id_note").click()
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{console_server}/review/items/{items[1].pk}/", timeout=10000)
    label = off_loop(lambda: m.ReviewLabel.objects.get())
    assert (label.label, label.turn) == (m.CORRECT, 2)  # turn 3 of the replay
    assert label.note == "reads the spec, then fixes the bound; 2 and 3 are fine"
    assert page.errors == []
