"""The runs write API: launch, rename and tag, cancel, resume, with the pages' rules (who may is
in test_roles_matrix.py); bad input answers 400 naming the field and writes nothing, a status that
forbids the write 409, an unknown run 404; every endpoint is in the OpenAPI schema."""

from __future__ import annotations

import json

import pytest
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from tests.console.test_run_launch_form import launched, one_task_set  # noqa: F401 (fixture)
from tests.review.review_seed import make_roles
from tests.tasks_library.conftest import eager_celery, make_user, roles  # noqa: F401 (fixtures)
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(roles):
    make_roles()  # the operators group
    client = APIClient()
    client.force_authenticate(make_user("otto", "operators"))
    return client


def test_a_pipeline_launches_names_cancels_and_resumes_a_run(operator, eager_celery, launched):
    one_task_set("api-set")
    created = operator.post(
        "/api/runs/",
        {
            "task_set": "api-set",
            "steps": 4,
            "config": {"group_size": 2, "lr": 1e-4},
            "name": "from a notebook",
            "tags": ["api", "sweep"],
            "description": "lr sweep, point 1",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    run = TrainingRun.objects.get(pk=body["id"])
    assert (run.name, run.tags, run.launched_by) == ("from a notebook", ["api", "sweep"], "otto")
    assert run.config["group_size"] == 2 and run.total_steps == 4
    assert launched == [run.pk] and body["url"] == f"/runs/{run.pk}/"
    assert body["status"] == "launching"  # the launch ran (eager Celery) before the answer

    renamed = operator.patch(
        f"/api/runs/{run.pk}/", {"name": "lr 1e-4", "tags": ["api"]}, format="json"
    )
    assert renamed.status_code == 200 and renamed.json()["name"] == "lr 1e-4"
    assert operator.get(f"/api/runs/{run.pk}/").json()["tags"] == ["api"]

    cancelled = operator.post(f"/api/runs/{run.pk}/cancel/", {"reason": "wrong lr"}, format="json")
    assert cancelled.status_code == 202, cancelled.content
    run.refresh_from_db()
    assert run.status == "cancelled" and "otto through the API: wrong lr" in run.status_reason
    again = operator.post(f"/api/runs/{run.pk}/cancel/", {}, format="json")
    assert again.status_code == 409 and "already ended cancelled" in again.json()["error"]

    refused = operator.post(f"/api/runs/{run.pk}/resume/", format="json")
    assert refused.status_code == 409 and "not interrupted" in refused.json()["error"]
    TrainingRun.objects.filter(pk=run.pk).update(status="interrupted")
    resumed = operator.post(f"/api/runs/{run.pk}/resume/", format="json")
    assert resumed.status_code == 202 and "attempt 2" in resumed.json()["message"]
    assert launched == [run.pk, run.pk]


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        (
            {"task_set": "api-set", "steps": 4, "config": {"learning_rate": 3}},
            "config",
            "learning_rate",
        ),
        ({"task_set": "api-set", "steps": 4, "config": {"steps": 9}}, "config", "steps"),
        ({"task_set": "nowhere", "steps": 4}, "task_set", "no task set named 'nowhere'"),
        ({"task_set": "api-set", "steps": 0}, "steps", "steps:"),
        ({"task_set": "api-set", "steps": 4, "colour": "red"}, "colour", "unknown field"),
        ({"task_set": "api-set", "steps": 4, "tags": ["two words"]}, "tags", "not a tag"),
        ({"task_set": "api-set", "steps": 4, "backend": "slurm"}, "backend", "backend:"),
    ],
)
def test_a_bad_launch_names_the_field_and_creates_nothing(operator, launched, payload, field, says):
    one_task_set("api-set")
    response = operator.post("/api/runs/", payload, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field and says in body["error"], body
    assert not TrainingRun.objects.exists() and launched == []


def test_unknown_runs_are_404(operator):
    for method, path in (
        ("get", "/api/runs/999/"),
        ("patch", "/api/runs/999/"),
        ("post", "/api/runs/999/cancel/"),
        ("post", "/api/runs/999/resume/"),
    ):
        response = getattr(operator, method)(path, {}, format="json")
        assert response.status_code == 404, (method, path, response.status_code)


def test_the_schema_documents_the_write_api():
    response = APIClient().get("/api/schema/", {"format": "json"})
    schema = json.loads(response.content)
    validate_schema(schema)
    paths = schema["paths"]
    assert {"get", "post"} <= set(paths["/api/runs/"])
    assert {"get", "patch"} <= set(paths["/api/runs/{run_id}/"])
    for path in (
        "/api/runs/{run_id}/cancel/",
        "/api/runs/{run_id}/resume/",
        "/api/review/queues/",
        "/api/review/items/{item_id}/label/",
        "/api/review/items/{item_id}/confirm/",
        "/api/task-sets/{name}/pin/",
    ):
        assert "post" in paths[path], path
    launch = paths["/api/runs/"]["post"]
    assert "403" in launch["responses"] and "400" in launch["responses"]
