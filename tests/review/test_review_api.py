"""The review API: a pipeline creates a queue with its own label set and consensus rule, reviewers
label through it, the rule decides and feeds back; bad input is 400 naming the field, and nothing
is written. (Who may: tests/console/test_roles_matrix.py.)"""

import pytest
from rest_framework.test import APIClient

from console.review import models as m
from tasks_library.models import TaskVersion
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories

pytestmark = pytest.mark.django_db


def as_user(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def world(humaneval):
    make_roles()
    run, versions = seed_run(humaneval, tasks=1)
    seed_trajectories(run, versions, [{"reward": 1.0}])
    return (
        run,
        versions[0],
        make_user("otto", "operator"),
        make_user("rita", "reviewer"),
        make_user("rex", "reviewer"),
    )


def test_a_pipeline_builds_a_queue_and_reviewers_label_through_the_api(world):
    run, version, otto, rita, rex = world
    created = as_user(otto).post(
        "/api/review/queues/",
        {
            "name": "nightly",
            "run": run.pk,
            "strategy": "uniform",
            "size": 1,
            "reviewers_per_item": 2,
            "reviewers": ["rita", "rex"],
            "labels": ["correct", "broken_task", {"value": "slow", "title": "too slow"}],
            "quorum": 2,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    queue = created.json()
    assert [lab["value"] for lab in queue["labels"]] == ["correct", "broken_task", "slow"]
    assert (
        queue["consensus"] == "quorum" and "once 2 of the item's reviewers agree" in queue["rule"]
    )
    item = queue["items"][0]["id"]
    first = as_user(rita).post(
        f"/api/review/items/{item}/label/", {"label": "broken_task", "note": "x"}, format="json"
    )
    assert first.status_code == 200 and first.json()["decision"] == ""
    assert not TaskVersion.objects.get(pk=version.pk).quarantined
    second = as_user(rex).post(
        f"/api/review/items/{item}/label/", {"label": "broken_task", "note": "y"}, format="json"
    )
    assert second.json()["decision"] == "broken_task" and second.json()["feedback"]["quarantined"]
    assert TaskVersion.objects.get(pk=version.pk).quarantined
    detail = as_user(otto).get(f"/api/review/queues/{queue['id']}/").json()
    assert detail["items"][0]["decision"] == "broken_task"
    assert {r["reviewer"]: r["label"] for r in detail["items"][0]["reviewers"]} == {
        "rita": "broken_task",
        "rex": "broken_task",
    }
    refused = as_user(rita).post(
        f"/api/review/items/{item}/label/", {"label": "reward_hack", "note": "z"}, format="json"
    )
    assert refused.status_code == 400 and refused.json()["field"] == "label"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reviewers": ["nobody"]}, "reviewers"),
        ({"strategy": "random"}, "strategy"),
        ({"labels": ["only"]}, "labels"),
        ({"quorum": 5}, "quorum"),
        ({"run": 999}, "run"),
        ({"size": 0}, "size"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_queue_names_the_field_and_writes_nothing(world, change, field):
    run, _version, otto, _rita, _rex = world
    payload = {
        "name": "bad",
        "run": run.pk,
        "strategy": "uniform",
        "size": 1,
        "reviewers_per_item": 2,
        "reviewers": ["rita", "rex"],
        **change,
    }
    response = as_user(otto).post("/api/review/queues/", payload, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field, response.json()
    assert not m.ReviewQueue.objects.exists()
