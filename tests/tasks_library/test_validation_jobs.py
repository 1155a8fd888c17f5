"""Validation runs as a job a page or a script follows: the pipeline reports each stage as it
starts, the job records it and then every version's verdict; the validate button and the API
answer with the job to follow; an unknown version is refused naming the ids. The sandbox is real."""

import pytest
from django.test import Client

from tasks_library.models import ValidationJob
from tasks_library.tasks import validate_task_versions
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.tasks_library.conftest import client_for

pytestmark = pytest.mark.django_db
LIGHT = {"reference_runs": 1, "mutants": 2}


def test_the_pipeline_reports_each_stage_and_the_job_records_it(library):
    seen = []
    task_versions_validate(
        versions=[library[0]],
        options=Options(**LIGHT),
        on_stage=lambda stage, done, total: seen.append((stage, done, total)),
    )
    assert seen == [
        ("reference", 0, 5),
        ("trivial", 1, 5),
        ("examples", 2, 5),
        ("mutation", 3, 5),
        ("storing", 4, 5),
    ]
    job = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
    validate_task_versions.run([library[0].pk], LIGHT, job.pk)  # what the worker runs
    job.refresh_from_db()
    assert job.status == "done" and job.stages_done == job.stages_total == 5
    assert job.started_at and job.finished_at and job.stage == ""
    (result,) = job.results
    assert result["task_id"] == "HumanEval/0" and result["verdict"] == "valid"
    assert result["quarantined"] is False


def test_the_validate_button_answers_with_the_job_to_follow(library, curator, eager_celery):
    client = Client()
    client.force_login(curator)
    response = client.post("/tasks/HumanEval/0/validate/", {"number": 1})
    job = ValidationJob.objects.get()
    assert (
        response.status_code == 302
        and response["Location"] == f"/tasks/HumanEval/0/?v=1&job={job.pk}"
    )
    assert job.status == "done" and job.created_by == "cora"  # eager: the worker ran it already
    page = client.get(response["Location"]).content.decode()
    assert 'id="job-panel"' in page and f"/api/validation-jobs/{job.pk}/" in page
    status = client.get(f"/api/validation-jobs/{job.pk}/").json()
    assert status["status"] == "done" and status["results"][0]["verdict"] == "valid"


def test_the_api_answers_with_the_job_and_refuses_unknown_versions(library, curator, eager_celery):
    api = client_for(curator)
    response = api.post(
        "/api/task-versions/validate/", {"ids": [library[0].pk], **LIGHT}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status_url"] == f"/api/validation-jobs/{body['job']}/"
    assert api.get(body["status_url"]).json()["status"] == "done"
    refused = api.post("/api/task-versions/validate/", {"ids": [999999]}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "ids"
    assert ValidationJob.objects.count() == 1


def test_a_job_whose_pipeline_fails_says_why(library):
    job = ValidationJob.objects.create(version_ids=[library[0].pk], created_by="cora")
    with pytest.raises(TypeError):
        validate_task_versions.run([library[0].pk], {"colour": "red"}, job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "colour" in job.error
