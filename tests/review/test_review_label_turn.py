"""A review label may point at one turn of the trajectory: through the service, the labelling
page (the turn as the replay numbers it) and the API; the replay marks the turn with the label;
a turn the trajectory does not have is refused naming the field."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from console.review import models as m
from console.review.services import review_label, review_queue_create
from core.errors import InputError
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.models import Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=1)
    (trajectory,) = seed_trajectories(run, versions, [{"reward": 1.0}])
    Turn.objects.bulk_create(
        Turn(
            trajectory=trajectory,
            index=i,
            policy_text=f"<tool_call>call {i}</tool_call>",
            action="tool_calls",
            observation=f"output {i}",
            sandbox_status="ok",
        )
        for i in range(3)
    )
    rita, rex = make_user("rita", "reviewer"), make_user("rex", "reviewer")
    queue = review_queue_create(
        name="turns",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=2,
        reviewers=[rita, rex],
        created_by=make_user("cora", "curator"),
    )
    return queue.items.get(), rita, rex


def test_a_label_points_at_a_turn_and_relabelling_moves_it(item):
    item, rita, _rex = item
    record = review_label(
        item_id=item.pk, reviewer=rita, label=m.REWARD_HACK, note="reads the tests", turn=1
    )
    assert record.turn == 1
    record = review_label(item_id=item.pk, reviewer=rita, label=m.CORRECT)
    assert record.turn is None and m.ReviewLabel.objects.get(pk=record.pk).turn is None


@pytest.mark.parametrize("turn", [3, -1, True])
def test_a_turn_the_trajectory_does_not_have_is_refused(item, turn):
    item, rita, _rex = item
    with pytest.raises(InputError, match="has 3 turn") as caught:
        review_label(item_id=item.pk, reviewer=rita, label=m.CORRECT, turn=turn)
    assert caught.value.field == "turn"
    assert not m.ReviewLabel.objects.exists()


def test_the_labelling_page_takes_the_turn_and_the_replay_marks_it(item):
    item, rita, rex = item
    web = Client()
    web.force_login(rita)
    url = f"/review/items/{item.pk}/"
    answer = web.post(
        url + "label/",
        {"label": m.REWARD_HACK, "note": "copies the expected value", "turn": "2"},
    )
    assert answer.status_code == 302
    assert m.ReviewLabel.objects.get(reviewer=rita).turn == 1  # turn 2 of the replay
    page = web.get(url).content.decode()
    assert "you: reward hack at turn 2" in page
    assert 'class="cell sb-ok labelled"' in page and "labelled rita: reward hack" in page
    assert page.count('<span class="turn-label">') == 1
    # another reviewer does not see it before labelling (no anchoring)
    web.force_login(rex)
    assert "labelled rita" not in web.get(url).content.decode()
    # a turn past the last is a form error naming the field, nothing saved
    answer = web.post(url + "label/", {"label": m.CORRECT, "turn": "4"})
    assert answer.status_code == 400 and 'id="turn-error"' in answer.content.decode()
    assert not m.ReviewLabel.objects.filter(reviewer=rex).exists()


def test_the_api_takes_the_turn_index(item):
    item, _rita, rex = item
    api = APIClient()
    api.force_authenticate(rex)
    answer = api.post(
        f"/api/review/items/{item.pk}/label/",
        {"label": m.BROKEN_TASK, "note": "the tests contradict", "turn": 0},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["turn"] == 0 and m.ReviewLabel.objects.get(reviewer=rex).turn == 0
    answer = api.post(
        f"/api/review/items/{item.pk}/label/", {"label": m.CORRECT, "turn": 9}, format="json"
    )
    assert answer.status_code == 400 and "turn" in answer.content.decode()
