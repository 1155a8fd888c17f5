"""The trajectory's own replay page marks a turn a reviewer labelled, in its turn index and its
header, as the labelling page does (it once marked it only there); a signed-out visitor sees no
review data, as the page's review panel says."""

import pytest
from django.test import Client

from console.review import models as m
from console.review.services import review_label, review_queue_create
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.models import Turn

pytestmark = pytest.mark.django_db


def test_the_trajectory_page_marks_the_labelled_turn(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=1)
    (trajectory,) = seed_trajectories(run, versions, [{"reward": 1.0}])
    Turn.objects.bulk_create(
        Turn(trajectory=trajectory, index=i, policy_text=f"turn {i}", action="tool_calls")
        for i in range(3)
    )
    rita = make_user("rita", "reviewer")
    queue = review_queue_create(
        name="turns",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=make_user("cora", "curator"),
        labels=[m.CORRECT, {"value": "off_topic", "title": "<b>off</b> topic"}],
    )
    review_label(item_id=queue.items.get().pk, reviewer=rita, label="off_topic", note="", turn=1)
    url = f"/runs/{run.pk}/trajectories/{trajectory.pk}/"
    web = Client()
    web.force_login(make_user("vic", "viewer"))
    page = web.get(url).content.decode()
    assert page.count('class="cell sb-none labelled"') == 1
    said = "labelled rita: &lt;b&gt;off&lt;/b&gt; topic"  # the queue's own title, escaped
    assert f'title="turn 2 · tool_calls · no sandbox · {said}"' in page
    assert page.count(f'<span class="turn-label">{said}</span>') == 1
    anonymous = Client().get(url).content.decode()
    assert "labelled rita" not in anonymous and 'class="cell sb-none labelled"' not in anonymous
