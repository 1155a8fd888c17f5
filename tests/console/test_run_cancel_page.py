"""The run page's Cancel button: curators cancel a run (trainer stopped, status recorded); viewers
and anonymous users cannot; an ended run is not cancelled again."""

import re

import pytest
from django.test import Client

from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.tasks_library.conftest import eager_celery, make_user, roles  # noqa: F401 (fixtures)
from training import services
from training.config import RunConfig
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending_run(roles, humaneval):
    row = humaneval[0]
    tasks_import(
        source="humaneval",
        task_set_name="cancel",
        records=[
            {
                "task_id": row["task_id"],
                "prompt": row["prompt"],
                "entry_point": row["entry_point"],
                "reference_solution": row["canonical_solution"],
                "tests": row["test"],
                "where": "test",
            }
        ],
    )
    task_set = task_set_get(name="cancel")
    task_versions_validate(
        versions=list(task_set_versions(task_set=task_set)),
        options=Options(reference_runs=1, mutants=0),
    )
    return services.run_create(task_set=task_set, config=RunConfig(steps=2))


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_curator_cancels_a_run_from_its_page(pending_run, eager_celery):
    client = logged_in(make_user("cora", "curators"))
    page = client.get(f"/runs/{pending_run.pk}/")
    assert b"Cancel run" in page.content
    response = client.post(f"/runs/{pending_run.pk}/cancel/", follow=True)
    assert response.status_code == 200 and b"cancelling run" in response.content
    pending_run.refresh_from_db()
    assert pending_run.status == TrainingRun.CANCELLED
    assert "cora" in pending_run.status_reason
    # once ended, the button is hidden (the page shows it again only for a run that may cancel)
    # and a second post says so without an error page
    assert re.search(
        r'<form [^>]*id="cancel-form"[^>]* hidden>',
        client.get(f"/runs/{pending_run.pk}/").content.decode(),
    )
    again = client.post(f"/runs/{pending_run.pk}/cancel/", follow=True)
    assert again.status_code == 200 and b"nothing to cancel" in again.content


def test_viewers_and_anonymous_users_cannot_cancel(pending_run):
    viewer = logged_in(make_user("vic", "viewers"))
    assert b"Cancel run" not in viewer.get(f"/runs/{pending_run.pk}/").content
    assert viewer.post(f"/runs/{pending_run.pk}/cancel/").status_code == 403
    anonymous = Client().post(f"/runs/{pending_run.pk}/cancel/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert (
        logged_in(make_user("cora", "curators")).get(f"/runs/{pending_run.pk}/cancel/").status_code
        == 405
    )
    pending_run.refresh_from_db()
    assert pending_run.status == TrainingRun.PENDING
