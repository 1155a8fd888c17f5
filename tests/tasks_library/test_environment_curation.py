"""Curating environments in the API and the console: create (pins checked, naming the package),
build through Celery (the outcome and log on the environment), read what was installed and who
uses it, edit into a new version that the tasks move to and are re-validated in; viewers read,
only curators write."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from tasks_library.models import EnvironmentVersion, TaskVersion
from tasks_library.tasks import validate_task_versions
from tests.tasks_library.conftest import client_for


@pytest.fixture
def data_tasks(db):
    call_command("import_tasks", "data-analysis", stdout=StringIO())
    return EnvironmentVersion.objects.get(name="data-analysis")


@pytest.mark.django_db
def test_create_refuses_unpinned_packages_naming_them(curator):
    api = client_for(curator)
    reply = api.post(
        "/api/environments/",
        {"name": "loose", "runtime": "python3.11", "packages": ["numpy"]},
        format="json",
    )
    assert reply.status_code == 400
    assert reply.json()["field"] == "packages" and "'numpy' is not pinned" in reply.json()["error"]
    reply = api.post(
        "/api/environments/", {"name": "x", "runtime": "ruby3", "packages": []}, format="json"
    )
    assert reply.status_code == 400 and reply.json()["field"] == "runtime"
    assert not EnvironmentVersion.objects.exists()


@pytest.mark.django_db
def test_debian_packages_go_to_a_debian_root_only_and_name_the_bad_one(curator):
    api = client_for(curator)
    host = {"name": "web", "runtime": "python3.11", "debian_packages": ["nginx-light"]}
    reply = api.post("/api/environments/", host, format="json")
    assert reply.status_code == 400 and reply.json()["field"] == "debian_packages"
    assert "runs on the host's system; choose python3.13" in reply.json()["error"]
    bad = {"name": "web", "runtime": "python3.13", "debian_packages": ["nginx; rm -rf /"]}
    reply = api.post("/api/environments/", bad, format="json")
    assert reply.status_code == 400
    assert "'nginx; rm -rf /' is not a package name" in reply.json()["error"]
    assert not EnvironmentVersion.objects.exists()
    good = {"name": "web", "runtime": "python3.13", "debian_packages": ["sqlite3", "nginx-light"]}
    reply = api.post("/api/environments/", good, format="json")
    assert reply.status_code == 201, reply.json()
    assert reply.json()["debian_packages"] == ["nginx-light", "sqlite3"]  # sorted: one root
    again = api.post(
        "/api/environments/", {**good, "debian_packages": ["nginx-light", "sqlite3"]}, format="json"
    )
    assert again.status_code == 201 and again.json()["id"] == reply.json()["id"]
    bare = api.post("/api/environments/", {"name": "web", "runtime": "python3.13"}, format="json")
    assert bare.json()["content_hash"] != reply.json()["content_hash"]


@pytest.mark.django_db
def test_viewers_read_but_do_not_write(viewer, data_tasks):
    api = client_for(viewer)
    listed = api.get("/api/environments/").json()
    assert [e["name"] for e in listed] == ["data-analysis"] and listed[0]["task_versions"] == 7
    reply = api.post(f"/api/environments/{data_tasks.pk}/build/")
    assert reply.status_code == 403
    reply = api.post("/api/environments/", {"name": "a", "runtime": "python3.11"}, format="json")
    assert reply.status_code == 403


@pytest.mark.django_db(transaction=True)
def test_build_through_celery_records_what_was_installed(curator, data_tasks, eager_celery):
    api = client_for(curator)
    reply = api.post(f"/api/environments/{data_tasks.pk}/build/")
    assert reply.status_code == 202
    env = api.get(f"/api/environments/{data_tasks.pk}/").json()
    assert env["build_status"] == "built" and len(env["build_key"]) == 64
    assert {p["name"].lower() for p in env["resolved_packages"]} >= {"numpy", "pandas"}
    assert "pip install" in env["build_log"] and "--target" in env["build_log"]
    assert len(env["used_by"]) == 7 and env["size_bytes"] > 0

    page = Client()
    page.force_login(curator)
    html = page.get(f"/environments/{data_tasks.pk}/").content.decode()
    assert "data/revenue-by-region v1" in html and "pandas" in html and "built in" in html
    assert "Environments" in page.get("/environments/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_failed_build_names_the_package_and_publishes_nothing(curator, eager_celery):
    api = client_for(curator)
    created = api.post(
        "/api/environments/",
        {"name": "typo", "runtime": "python3.11", "packages": ["crucible-no-such-pkg-9==1.0"]},
        format="json",
    ).json()
    api.post(f"/api/environments/{created['id']}/build/")
    env = api.get(f"/api/environments/{created['id']}/").json()
    assert env["build_status"] == "failed" and env["build_key"] == ""
    assert "crucible-no-such-pkg-9" in env["build_error"] and "typo@" in env["build_error"]


@pytest.mark.django_db(transaction=True)
def test_edit_moves_the_tasks_and_revalidates_them(curator, data_tasks, no_queued_validation):
    api = client_for(curator)
    reply = api.post(
        f"/api/environments/{data_tasks.pk}/versions/",
        {
            "runtime": "python3.11",
            "packages": ["numpy==2.4.6", "pandas==3.1.1"],
            "image": "registry.example/crucible-env:data-2",
            "change_note": "an image for the cluster",
            "move": True,
        },
        format="json",
    )
    assert reply.status_code == 201, reply.json()
    body = reply.json()
    assert body["parent"] == data_tasks.pk and len(body["moved"]) == 7
    new = EnvironmentVersion.objects.get(pk=body["id"])
    moved = TaskVersion.objects.filter(environment=new)
    assert moved.count() == 7 and all(v.number == 2 for v in moved)
    job = api.get(body["validation_job"]).json()
    assert job["status"] == "queued" and sorted(job["version_ids"]) == sorted(m.pk for m in moved)
    # what the job runs (the pipeline, lighter here), in the new environment version
    validate_task_versions(job["version_ids"], {"reference_runs": 1, "mutants": 2})
    assert {v.verdict for v in moved.all()} <= {"valid", "weak_suite"}
    new.refresh_from_db()
    assert {v.report["environment"]["ran_in"][0] for v in moved.all()} == {new.build_key}
    # the old versions stay as they were, in the old environment
    assert TaskVersion.objects.filter(environment=data_tasks).count() == 7

    again = api.post(
        f"/api/environments/{new.pk}/versions/",
        {
            "runtime": "python3.11",
            "packages": ["numpy==2.4.6", "pandas==3.1.1"],
            "image": "registry.example/crucible-env:data-2",
            "change_note": "same",
        },
        format="json",
    )
    assert again.status_code == 400 and "nothing changed" in again.json()["error"]


@pytest.mark.django_db
def test_console_create_form_shows_the_error_on_the_field(curator):
    page = Client()
    page.force_login(curator)
    reply = page.post(
        "/environments/",
        {"name": "loose", "runtime": "python3.11", "packages": "pandas>=2\n"},
    )
    assert reply.status_code == 200
    assert "is not pinned" in reply.content.decode()
    reply = page.post(
        "/environments/", {"name": "tidy", "runtime": "python3.11", "packages": "six==1.17.0\n"}
    )
    env = EnvironmentVersion.objects.get(name="tidy")
    assert reply.status_code == 302 and reply.url == f"/environments/{env.pk}/"
    assert env.packages == ["six==1.17.0"] and json.dumps(env.packages)
