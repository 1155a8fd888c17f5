"""Agreement over a queue's own labels: two reviewers who give an item a custom label count as
agreeing on it (the run's review page once answered 500: "fleiss_kappa: every item needs the
same number of labels, got totals [0, 2]", its counts knowing only the built-in labels)."""

import pytest
from django.test import Client

from console.review import models as m
from console.review.agreement import agreement
from console.review.services import review_label, review_queue_create
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories


def test_custom_labels_are_categories_of_their_own():
    # 3 items, 2 reviewers each: off_topic/off_topic, off_topic/correct, correct/correct.
    # P_i = 1, 0, 1: P_bar = 2/3; p = (3/6, 3/6): P_e = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    units = {
        1: {"ann": "off_topic", "ben": "off_topic"},
        2: {"ann": "off_topic", "ben": m.CORRECT},
        3: {"ann": m.CORRECT, "ben": m.CORRECT},
    }
    report = agreement(units)
    assert report["fleiss"] == {"kappa": pytest.approx(1 / 3), "items": 3, "labels_per_item": 2}
    assert report["observed"] == pytest.approx(2 / 3)
    # Cohen: p_o = 2/3; ann off 2/3, correct 1/3; ben off 1/3, correct 2/3: p_e = 4/9;
    # kappa = (2/3 - 4/9) / (5/9) = 0.4
    assert report["cohen"][0]["kappa"] == pytest.approx(0.4)


@pytest.mark.django_db
def test_the_run_review_page_counts_a_custom_label(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=2)
    trajectories = seed_trajectories(run, versions, [{"reward": 1.0}, {"reward": 0.0}])
    cora, ann, ben = (
        make_user("cora", "curator"),
        make_user("ann", "reviewer"),
        make_user("ben", "reviewer"),
    )
    queue = review_queue_create(
        name="own labels",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=2,
        reviewers_per_item=2,
        reviewers=[ann, ben],
        created_by=cora,
        labels=[m.CORRECT, {"value": "off_topic", "title": "off topic"}],
    )
    items = {item.trajectory_id: item for item in queue.items.all()}
    for trajectory in trajectories:
        for user in (ann, ben):
            review_label(item_id=items[trajectory.pk].pk, reviewer=user, label="off_topic", note="")
    client = Client()
    client.force_login(make_user("vic", "viewer"))
    page = client.get(f"/runs/{run.pk}/review/")
    assert page.status_code == 200
    fleiss = page.context["summary"]["agreement"]["fleiss"]
    assert fleiss["items"] == 2 and fleiss["labels_per_item"] == 2
    assert page.context["summary"]["agreement"]["observed"] == 1.0
