"""The runs table (``/`` and ``GET /api/runs/``): name, description, tags, launcher, status,
duration, steps and the latest and best value of chosen metrics as columns; sorted and filtered by
any of them in the database; bad filters refused naming the parameter."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tasks_library.models import TaskSet
from training.models import HeldOutEvaluation, StepMetric, TrainingRun

pytestmark = pytest.mark.django_db


def run(name, *, status="succeeded", tags=(), launched_by="otto", minutes=None, rewards=(), **kw):
    task_set, _ = TaskSet.objects.get_or_create(name=kw.pop("task_set", "humaneval"))
    now = timezone.now()
    made = TrainingRun.objects.create(
        task_set=task_set,
        name=name,
        description=kw.pop("description", ""),
        tags=list(tags),
        launched_by=launched_by,
        status=status,
        total_steps=10,
        config={},
        started_at=now - timedelta(minutes=minutes) if minutes is not None else None,
        finished_at=now if minutes is not None and status != "running" else None,
    )
    StepMetric.objects.bulk_create(
        StepMetric(
            run=made,
            step=i + 1,
            reward_mean=r,
            metrics={"reward/mean": r, "reward/pass_rate": r / 2, "loss/kl": 0.1 * (i + 1)},
        )
        for i, r in enumerate(rewards)
    )
    return made


@pytest.fixture
def runs():
    a = run("baseline", tags=["sweep", "lr-1e-4"], minutes=30, rewards=[0.2, 0.6, 0.4])
    b = run(
        "quality bonus",
        tags=["sweep"],
        minutes=5,
        rewards=[0.1, 0.3],
        launched_by="cora",
        description="correctness plus a 0.2 quality share",
    )
    c = run("long one", status="running", minutes=120, rewards=[0.5], task_set="mbpp")
    d = run("not started", status="pending", rewards=[])
    HeldOutEvaluation.objects.create(
        run=a,
        step=3,
        task_set=a.task_set,
        tasks=4,
        samples_per_task=2,
        pass_at_k={"1": 0.25},
        reward_mean=0.3,
    )
    return a, b, c, d


def ids(response) -> list[int]:
    return [row["id"] for row in response.json()["results"]]


def page_ids(response) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-run-id="(\d+)"', response.content.decode())]


def test_columns_latest_and_best_of_each_metric(runs):
    a, b, c, d = runs
    rows = {row["id"]: row for row in Client().get("/api/runs/").json()["results"]}
    assert rows[a.pk]["name"] == "baseline" and rows[a.pk]["tags"] == ["sweep", "lr-1e-4"]
    assert rows[a.pk]["launched_by"] == "otto" and rows[a.pk]["steps_done"] == 3
    assert rows[a.pk]["metrics"]["reward/mean"] == {"latest": 0.4, "best": 0.6}
    assert rows[a.pk]["metrics"]["heldout/pass@1"] == {"latest": 0.25, "best": 0.25}
    assert rows[d.pk]["metrics"]["reward/mean"] == {"latest": None, "best": None}
    assert rows[d.pk]["duration_s"] is None and rows[a.pk]["duration_s"] == pytest.approx(1800, 5)
    kl = Client().get("/api/runs/", {"metric": "loss/kl"}).json()["results"]
    kl = {row["id"]: row["metrics"]["loss/kl"] for row in kl}
    assert kl[a.pk]["best"] == pytest.approx(0.1)  # a loss: the lowest is best
    page = Client().get("/").content.decode()
    assert "quality bonus" in page and "correctness plus a 0.2 quality share" in page
    assert (
        "best ↑" in page and "the best reward/mean over the run&#x27;s steps: the highest" in page
    )
    assert "0.600" in page


def test_sorted_by_any_column(runs):
    a, b, c, d = runs
    client = Client()
    assert ids(client.get("/api/runs/", {"sort": "-reward/mean:best"})) == [a.pk, c.pk, b.pk, d.pk]
    assert ids(client.get("/api/runs/", {"sort": "reward/mean:latest"})) == [b.pk, a.pk, c.pk, d.pk]
    assert ids(client.get("/api/runs/", {"sort": "-duration"})) == [c.pk, a.pk, b.pk, d.pk]
    assert ids(client.get("/api/runs/", {"sort": "name"})) == [a.pk, c.pk, d.pk, b.pk]
    assert ids(client.get("/api/runs/", {"sort": "-steps"}))[:2] == [a.pk, b.pk]
    assert page_ids(client.get("/", {"sort": "-reward/mean:best"})) == [a.pk, c.pk, b.pk, d.pk]


def test_filtered_by_any_column(runs):
    a, b, c, d = runs
    client = Client()
    assert ids(client.get("/api/runs/", {"q": "quality"})) == [b.pk]
    assert ids(client.get("/api/runs/", {"tag": "sweep", "sort": "id"})) == [a.pk, b.pk]
    assert ids(client.get("/api/runs/", {"tag": "sweep,lr-1e-4"})) == [a.pk]
    assert ids(client.get("/api/runs/", {"status": "running"})) == [c.pk]
    assert ids(client.get("/api/runs/", {"launched_by": "cor"})) == [b.pk]
    assert ids(client.get("/api/runs/", {"task_set": "mbpp"})) == [c.pk]
    assert ids(client.get("/api/runs/", {"f.reward/mean:best": ">0.45", "sort": "id"})) == [
        a.pk,
        c.pk,
    ]
    assert ids(client.get("/api/runs/", {"f.reward/mean:latest": "0.35..0.45"})) == [a.pk]
    assert ids(client.get("/api/runs/", {"f.duration": ">1h"})) == [c.pk]
    assert ids(client.get("/api/runs/", {"f.steps": "<=2", "sort": "id"})) == [b.pk, c.pk, d.pk]
    assert page_ids(client.get("/", {"q": "baseline"})) == [a.pk]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"sort": "colour"}, "sort"),
        ({"f.reward/mean:best": "big"}, "f.reward/mean:best"),
        ({"f.steps": "5m"}, "f.steps"),
        ({"f.name": ">1"}, "filter"),
        ({"status": "exploded"}, "status"),
    ],
)
def test_bad_parameters_are_refused_naming_them(runs, params, field):
    api = Client().get("/api/runs/", params)
    assert api.status_code == 400 and api.json()["field"] == field, api.content
    page = Client().get("/", params)
    assert page.status_code == 400 and 'id="table-error"' in page.content.decode()
    assert len(page_ids(page)) == 4  # the table falls back to every run


def test_a_fixed_number_of_queries_whatever_the_runs(runs):
    for i in range(20):
        run(f"more {i}", rewards=[0.1 * (i % 10)])
    client = Client()
    with CaptureQueriesContext(connection) as few:
        client.get("/", {"metric": ["reward/mean", "loss/kl", "heldout/pass@1"]})
    with CaptureQueriesContext(connection) as api:
        client.get("/api/runs/", {"metric": ["reward/mean", "loss/kl", "heldout/pass@1"]})
    assert len(few) <= 8 and len(api) <= 6, (len(few), len(api))
