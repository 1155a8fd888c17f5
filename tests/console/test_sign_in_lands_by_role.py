"""After signing in, each role lands on the page it works from: a reviewer on their queue (the
newest with an item still open for them), a curator on the task library, operators, admins and
viewers on the runs; a ``next`` always wins."""

import pytest
from django.test import Client

from console.review import models as m
from console.review.services import review_label, review_queue_create
from tests.review.review_seed import PASSWORD, make_roles, make_user, seed_run, seed_trajectories

pytestmark = pytest.mark.django_db


def sign_in(name: str, **extra) -> str:
    response = Client().post("/accounts/login/", {"username": name, "password": PASSWORD, **extra})
    assert response.status_code == 302, response.content[:300]
    return response["Location"]


def test_each_role_lands_on_its_page(humaneval):
    make_roles()
    users = {
        role: make_user(name, role, password=PASSWORD)
        for role, name in (
            ("admin", "ada"),
            ("curator", "cora"),
            ("operator", "otto"),
            ("reviewer", "rita"),
            ("viewer", "vic"),
        )
    }
    make_user("rex", "reviewer", password=PASSWORD)
    run, versions = seed_run(humaneval, tasks=1)
    seed_trajectories(run, versions, [{"reward": 1.0}, {"reward": 0.0}])
    older = review_queue_create(
        name="done",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[users["reviewer"]],
        created_by=users["curator"],
    )
    review_label(item_id=older.items.get().pk, reviewer=users["reviewer"], label=m.CORRECT)
    newer = review_queue_create(
        name="open",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=2,
        reviewers_per_item=1,
        reviewers=[users["reviewer"]],
        created_by=users["curator"],
    )
    assert sign_in("rita") == f"/review/queues/{newer.pk}/"
    assert sign_in("rex") == "/review/"  # a reviewer with nothing open
    assert sign_in("cora") == "/tasks/"
    assert sign_in("otto") == "/"
    assert sign_in("ada") == "/"
    assert sign_in("vic") == "/"
    assert sign_in("rita", next=f"/runs/{run.pk}/") == f"/runs/{run.pk}/"
