"""Every page writes a time one way: ``YYYY-MM-DD HH:MM:SS UTC`` in a ``<time>`` element whose
``datetime`` is the ISO instant (the run page's status history, the run list, the task library,
the review pages)."""

import re

import pytest
from django.test import Client

from console.review import models as m
from console.review.services import review_label, review_queue_create
from tasks_library.models import TaskVersion
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.services import run_transition

pytestmark = pytest.mark.django_db
ANY_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:[+-]\d\d:\d\d|Z| UTC)?")
ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def shown_times(page: str) -> list[str]:
    """The times a reader sees: the text of the page, attributes left out."""
    text = re.sub(r"<[^>]*>", " ", page)
    return ANY_TIME.findall(text)


def test_every_page_writes_times_in_one_format(humaneval):
    make_roles()
    curator, rita = make_user("cora", "curator"), make_user("rita", "reviewer")
    run, versions = seed_run(humaneval, tasks=2)
    run_transition(run_id=run.pk, to_status="succeeded", reason="done")
    seed_trajectories(run, versions, [{"reward": 1.0}])
    TaskVersion.objects.filter(pk=versions[0].pk).update(
        quarantined=True, quarantine_reason="x", curated_by="cora", validated_at=run.created_at
    )
    queue = review_queue_create(
        name="times",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=curator,
    )
    item = queue.items.get()
    review_label(item_id=item.pk, reviewer=rita, label=m.CORRECT)
    client = Client()
    client.force_login(curator)
    task_id = versions[0].task.task_id
    pages = [
        "/",
        f"/runs/{run.pk}/",
        f"/tasks/{task_id}/",
        "/tasksets/",
        f"/tasksets/{run.task_set.name}/",
        "/review/",
        f"/review/queues/{queue.pk}/",
        f"/review/tasks/{versions[0].pk}/",
    ]
    seen = 0
    for path in pages:
        page = client.get(path).content.decode()
        times = shown_times(page)
        assert all(ONE_FORMAT.fullmatch(t) for t in times), (path, times)
        assert all(
            re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+">' + re.escape(t), page)
            for t in times
        ), (path, times)
        seen += len(times)
    assert seen >= 8
