"""The curation API: roles, filters, edits as new versions, bulk curation, diff, validate, pins,
schema, query counts."""

import base64
import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from core.permissions import is_curator
from tasks_library.models import TaskSet, TaskVersion
from tests.tasks_library.conftest import PASSWORD, client_for, many_versions


def ids_of(response) -> list[str]:
    return [row["task_id"] for row in response.json()["results"]]


@pytest.mark.django_db
def test_the_migration_creates_curators_and_viewers(roles):
    # roles: the migration's own function run again (a transactional test that ran before on
    # this worker flushed what the migration made)
    curators, viewers = Group.objects.get(name="curators"), Group.objects.get(name="viewers")
    curator_perms = set(curators.permissions.values_list("codename", flat=True))
    viewer_perms = set(viewers.permissions.values_list("codename", flat=True))
    assert {
        "add_taskversion",
        "change_taskversion",
        "add_taskset",
        "change_taskset",
        "view_task",
    } <= curator_perms
    assert "view_taskversion" in viewer_perms and not any(
        p.startswith(("add_", "change_")) for p in viewer_perms
    )


@pytest.mark.django_db
def test_anonymous_users_are_refused(library):
    client = client_for(None)
    assert client.get("/api/task-versions/").status_code in (401, 403)
    assert client.get("/api/tasks/HumanEval/0/").status_code in (401, 403)
    response = client.post(
        "/api/tasks/HumanEval/0/versions/", {"change_note": "x", "prompt": "y"}, format="json"
    )
    assert response.status_code in (401, 403)
    assert TaskVersion.objects.count() == 3


@pytest.mark.django_db
def test_http_basic_sign_in_works_for_scripts(library, viewer):
    token = base64.b64encode(f"vic:{PASSWORD}".encode()).decode()
    assert (
        APIClient().get("/api/task-versions/", HTTP_AUTHORIZATION=f"Basic {token}").status_code
        == 200
    )
    wrong = base64.b64encode(b"vic:nope").decode()
    refused = APIClient().get("/api/task-versions/", HTTP_AUTHORIZATION=f"Basic {wrong}")
    assert refused.status_code in (401, 403) and "password" in refused.json()["detail"]


@pytest.mark.django_db
def test_viewer_lists_filters_and_reads(library, viewer):
    client = client_for(viewer)
    assert ids_of(client.get("/api/task-versions/")) == [
        "HumanEval/0",
        "HumanEval/1",
        "HumanEval/2",
    ]
    assert ids_of(client.get("/api/task-versions/", {"verdict": "valid"})) == ["HumanEval/0"]
    assert ids_of(client.get("/api/task-versions/", {"status": "quarantined"})) == ["HumanEval/1"]
    assert ids_of(client.get("/api/task-versions/", {"status": "pending"})) == ["HumanEval/2"]
    assert ids_of(client.get("/api/task-versions/", {"status": "trainable"})) == ["HumanEval/0"]
    assert ids_of(client.get("/api/task-versions/", {"difficulty": "easy"})) == ["HumanEval/0"]
    assert ids_of(client.get("/api/task-versions/", {"tag": "lists"})) == ["HumanEval/0"]
    assert ids_of(client.get("/api/task-versions/", {"search": library[2].content_hash[:10]})) == [
        "HumanEval/2"
    ]
    assert ids_of(client.get("/api/task-versions/", {"source": "nowhere"})) == []

    row = client.get("/api/task-versions/", {"verdict": "valid"}).json()["results"][0]
    assert (
        row["version"] == library[0].content_hash[:12]
        and row["number"] == 1
        and row["tags"] == ["lists", "easy-one"]
    )
    assert row["difficulty"] == {
        "bucket": "easy",
        "mean": 0.8333,
        "std": pytest.approx(0.1034, abs=1e-3),
        "attempts_passed": 9,
        "attempts_total": 10,
    }

    bad = client.get("/api/task-versions/", {"verdict": "splendid"})
    assert (
        bad.status_code == 400
        and bad.json()["field"] == "verdict"
        and bad.json()["error"].startswith("verdict:")
    )
    assert (
        client.get("/api/task-versions/", {"difficulty": "impossible"}).json()["field"]
        == "difficulty"
    )

    detail = client.get("/api/tasks/HumanEval/1/versions/1/").json()
    assert detail["report"]["reference"]["failing"] == [
        {"test": "assert_1", "error": "AssertionError"}
    ]
    assert detail["test_suite"]["hidden_tests"] == library[1].test_suite.hidden_tests
    assert detail["quarantined"] and detail["environment"]["runtime"].startswith("python")
    task = client.get("/api/tasks/HumanEval/1/").json()
    assert [v["number"] for v in task["versions"]] == [1] and task["latest"]["prompt"] == library[
        1
    ].prompt

    assert client.get("/api/tasks/Nope/7/").status_code == 404
    assert client.get("/api/tasks/HumanEval/1/versions/9/").status_code == 404
    assert client.get("/api/tasks/Nope/7/diff/", {"old": 1, "new": 2}).status_code == 404


@pytest.mark.django_db
def test_viewer_gets_403_on_every_write(library, viewer):
    client = client_for(viewer)
    ids = [v.pk for v in library]
    writes = [
        ("/api/tasks/HumanEval/0/versions/", {"change_note": "x", "prompt": "changed"}),
        ("/api/task-versions/quarantine/", {"ids": ids, "reason": "no"}),
        ("/api/task-versions/approve/", {"ids": ids, "reason": "no"}),
        ("/api/task-versions/validate/", {"ids": ids}),
        ("/api/task-sets/mine/pin/", {"change_note": "x", "versions": ids}),
    ]
    for url, body in writes:
        response = client.post(url, body, format="json")
        assert response.status_code == 403, url
        assert "curators" in response.json()["detail"]
    assert TaskVersion.objects.count() == 3 and not TaskSet.objects.filter(name="mine").exists()
    assert not TaskVersion.objects.get(pk=library[0].pk).quarantined


@pytest.mark.django_db
def test_curator_edit_creates_a_new_version_authored_by_them(library, curator):
    old = library[0]
    new_reference = old.reference_solution.replace("distance", "gap")
    response = client_for(curator).post(
        "/api/tasks/HumanEval/0/versions/",
        {"change_note": "rename distance to gap", "reference_solution": new_reference},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["number"] == 2 and body["parent_number"] == 1 and body["author"] == "cora"
    assert body["verdict"] == "pending" and body["reference_solution"] == new_reference
    new = TaskVersion.objects.get(task__task_id="HumanEval/0", number=2)
    assert (
        new.author == "cora"
        and new.change_note == "rename distance to gap"
        and new.parent_id == old.pk
    )
    old.refresh_from_db()
    assert "distance" in old.reference_solution  # nothing overwritten


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body, field, message",
    [
        (
            {"change_note": "x", "hidden_tests": "def check(candidate):\n    pass\n"},
            "hidden_tests",
            "no assertion",
        ),
        ({"change_note": "x", "hidden_tests": "def check(:\n"}, "hidden_tests", "does not parse"),
        ({"change_note": "x", "timeout_s": -1}, "timeout_s", "must be a number of seconds"),
        ({"change_note": "x", "timeout_s": "soon"}, "timeout_s", "valid number"),
        ({"change_note": "  ", "prompt": "new prompt"}, "change_note", "say what changed"),
        ({"prompt": "new prompt"}, "change_note", "required"),
        ({"change_note": "x", "colour": "red"}, "colour", "unknown field"),
        (
            {"change_note": "x", "environment": {"runtime": "cobol"}},
            "environment",
            "unknown environment",
        ),
        ({"change_note": "x", "files": {"../up": "x"}}, "files", "relative path"),
        (
            {"change_note": "x", "base": 5, "prompt": "p"},
            None,
            None,
        ),  # unknown base version: 404 below
        ({"change_note": "x"}, None, "nothing changed"),
    ],
)
def test_bad_edit_is_400_naming_the_field_and_creates_nothing(
    library, curator, body, field, message
):
    response = client_for(curator).post("/api/tasks/HumanEval/0/versions/", body, format="json")
    if "base" in body:
        assert response.status_code == 404
    else:
        assert response.status_code == 400, response.json()
        assert response.json()["field"] == field and message in response.json()["error"]
    assert TaskVersion.objects.count() == 3


@pytest.mark.django_db
def test_bulk_quarantine_and_approve_record_the_curator(library, curator):
    client = client_for(curator)
    ids = [library[0].pk, library[2].pk]
    missing = client.post(
        "/api/task-versions/quarantine/", {"ids": ids, "reason": " "}, format="json"
    )
    assert missing.status_code == 400 and missing.json()["field"] == "reason"
    assert (
        client.post(
            "/api/task-versions/quarantine/", {"ids": [], "reason": "x"}, format="json"
        ).json()["field"]
        == "ids"
    )
    unknown = client.post(
        "/api/task-versions/quarantine/", {"ids": [999999], "reason": "x"}, format="json"
    )
    assert unknown.status_code == 400 and "999999" in unknown.json()["error"]
    assert not TaskVersion.objects.filter(quarantined=True).exclude(pk=library[1].pk).exists()

    done = client.post(
        "/api/task-versions/quarantine/", {"ids": ids, "reason": "tests too lenient"}, format="json"
    )
    assert done.status_code == 200 and done.json() == {"changed": 2}
    for pk in ids:
        version = TaskVersion.objects.get(pk=pk)
        assert (
            version.quarantined
            and version.quarantine_reason == "tests too lenient"
            and version.curated_by == "cora"
        )

    pending = client.post(
        "/api/task-versions/approve/", {"ids": [library[2].pk], "reason": "fine"}, format="json"
    )
    assert pending.status_code == 400 and "validate first" in pending.json()["error"]
    approved = client.post(
        "/api/task-versions/approve/",
        {"ids": [library[0].pk, library[1].pk], "reason": "read them"},
        format="json",
    )
    assert approved.json() == {"changed": 2}
    version = TaskVersion.objects.get(pk=library[1].pk)
    assert (
        not version.quarantined
        and version.override_reason == "read them"
        and version.curated_by == "cora"
    )


@pytest.mark.django_db
def test_diff_endpoint(library, curator):
    client = client_for(curator)
    client.post(
        "/api/tasks/HumanEval/0/versions/",
        {
            "change_note": "rename",
            "reference_solution": library[0].reference_solution.replace("distance", "gap"),
        },
        format="json",
    )
    body = client.get("/api/tasks/HumanEval/0/diff/", {"old": 1, "new": 2}).json()
    assert (
        body["old"] == 1
        and body["new"] == 2
        and [c["field"] for c in body["changes"]] == ["reference_solution"]
    )
    lines = body["changes"][0]["diff"].splitlines()
    assert any(line.startswith("-") and "distance" in line for line in lines[2:])
    assert any(line.startswith("+") and "gap" in line for line in lines[2:])
    assert client.get("/api/tasks/HumanEval/0/diff/", {"old": 1, "new": 1}).json()["changes"] == []
    bad = client.get("/api/tasks/HumanEval/0/diff/", {"new": 2})
    assert bad.status_code == 400 and bad.json()["field"] == "old"
    assert client.get("/api/tasks/HumanEval/0/diff/", {"old": 1, "new": 3}).status_code == 404


@pytest.mark.django_db
def test_validate_is_accepted_and_runs_the_pipeline(library, curator, eager_celery):
    client = client_for(curator)
    bad = client.post(
        "/api/task-versions/validate/", {"ids": [library[2].pk], "reference_runs": 0}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["field"] == "reference_runs"
    response = client.post(
        "/api/task-versions/validate/",
        {"ids": [library[2].pk], "reference_runs": 1, "mutants": 3},
        format="json",
    )
    assert (
        response.status_code == 202
        and response.json()["enqueued"] == [library[2].pk]
        and response.json()["job_id"]
    )
    version = TaskVersion.objects.get(pk=library[2].pk)
    assert (
        version.verdict != "pending"
        and version.report["reference"]["runs"] == 1
        and version.validated_at
    )


@pytest.mark.django_db
def test_task_set_pin_from_filter_and_ids_records_history(library, curator, viewer):
    client = client_for(curator)
    created = client.post(
        "/api/task-sets/curated/pin/",
        {"change_note": "valid ones", "description": "hand-picked", "filter": {"verdict": "valid"}},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert [v["task_id"] for v in created.json()["pinned"]] == ["HumanEval/0"]
    repinned = client.post(
        "/api/task-sets/curated/pin/",
        {"change_note": "add HumanEval/2", "versions": [library[0].pk, library[2].pk]},
        format="json",
    )
    assert repinned.status_code == 200
    body = client_for(viewer).get("/api/task-sets/curated/").json()
    assert [v["task_id"] for v in body["pinned"]] == ["HumanEval/0", "HumanEval/2"] and body[
        "size"
    ] == 2
    assert [(h["number"], h["author"], h["change_note"]) for h in body["history"]] == [
        (2, "cora", "add HumanEval/2"),
        (1, "cora", "valid ones"),
    ]
    assert body["description"] == "hand-picked" and body["latest_version"] == 2
    names = [s["name"] for s in client_for(viewer).get("/api/task-sets/").json()["results"]]
    assert names == ["curated", "lib"]

    def error(body, name="curated"):
        response = client.post(f"/api/task-sets/{name}/pin/", body, format="json")
        assert response.status_code == 400, response.json()
        return response.json()["field"]

    assert error({"change_note": "x"}) == "versions"
    assert error({"change_note": "x", "versions": [library[0].pk], "filter": {}}) == "versions"
    assert error({"change_note": "x", "filter": {"verdict": "splendid"}}) == "filter.verdict"
    assert (
        error({"change_note": "x", "filter": {"status": "quarantined"}}) == "filter"
    )  # none trainable
    assert error({"change_note": "x", "versions": [library[0].pk]}, name="no%20spaces") == "name"
    assert client.get("/api/task-sets/nothing-here/").status_code == 404
    assert TaskSet.objects.get(name="curated").versions.count() == 2


@pytest.mark.django_db
def test_schema_is_valid_openapi_with_every_endpoint(viewer):
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate_schema(schema)  # raises on an invalid OpenAPI 3 document
    assert schema["info"]["title"] == "Crucible API" and schema["openapi"].startswith("3.")
    for path in (
        "/api/task-versions/",
        "/api/task-versions/quarantine/",
        "/api/task-versions/approve/",
        "/api/task-versions/validate/",
        "/api/tasks/{task_id}/",
        "/api/tasks/{task_id}/versions/",
        "/api/tasks/{task_id}/versions/{number}/",
        "/api/tasks/{task_id}/diff/",
        "/api/task-sets/",
        "/api/task-sets/{name}/",
        "/api/task-sets/{name}/pin/",
    ):
        assert path in schema["paths"], path
    assert "post" in schema["paths"]["/api/tasks/{task_id}/versions/"]
    docs = APIClient().get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


@pytest.mark.django_db
def test_list_query_count_does_not_grow_with_page_size(viewer):
    many_versions(tasks=200, versions_each=2)
    client = APIClient()
    client.force_login(viewer)  # a real session: its queries are counted too
    counts = {}
    for params in (
        {"page_size": 10},
        {"page_size": 50},
        {"page_size": 200},
        {"page_size": 200, "all_versions": "true"},
        {"page_size": 50, "verdict": "valid", "difficulty": "medium"},
    ):
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/api/task-versions/", params)
        assert response.status_code == 200
        counts[json.dumps(params)] = len(queries)
        body = response.json()
        expected = 400 if "all_versions" in params else 200
        assert body["count"] == expected and len(body["results"]) == min(
            params["page_size"], expected
        )
    assert len(set(counts.values())) == 1, counts


@pytest.mark.django_db
def test_create_user_command_gives_a_role(roles, library, monkeypatch):
    monkeypatch.delenv("CRUCIBLE_PASSWORD", raising=False)
    with pytest.raises(CommandError, match="no password"):
        call_command("create_user", "ann", "--role", "curator", stdout=StringIO())
    monkeypatch.setenv("CRUCIBLE_PASSWORD", "s3cret-words")
    out = StringIO()
    call_command("create_user", "ann", "--role", "curator", stdout=out)
    assert "created user ann with role curator" in out.getvalue()
    ann = User.objects.get(username="ann")
    assert is_curator(ann) and ann.check_password("s3cret-words")
    token = base64.b64encode(b"ann:s3cret-words").decode()
    response = APIClient().post(
        "/api/task-versions/quarantine/",
        {"ids": [library[0].pk], "reason": "scripted"},
        format="json",
        HTTP_AUTHORIZATION=f"Basic {token}",
    )
    assert (
        response.status_code == 200
        and TaskVersion.objects.get(pk=library[0].pk).curated_by == "ann"
    )
    call_command("create_user", "ann", "--role", "viewer", stdout=StringIO())
    ann = User.objects.get(username="ann")
    assert not is_curator(ann) and list(ann.groups.values_list("name", flat=True)) == ["viewers"]
