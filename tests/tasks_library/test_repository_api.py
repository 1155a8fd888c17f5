"""The task library API on repository tasks: the new fields read back, edits make versions,
the diff names the changed fields; the OpenAPI schema describes them."""

import pytest

from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.conftest import client_for
from tests.tasks_library.repository_helpers import BUGGY, FAIL_TO_PASS, HIDDEN, PASS_TO_PASS, record


@pytest.fixture
def version(db) -> TaskVersion:
    repository_tasks_import([record(hidden_files=dict(HIDDEN))], author="alice")
    return TaskVersion.objects.get()


def test_a_repository_version_reads_back_with_its_fields(version, viewer):
    body = client_for(viewer).get("/api/tasks/calc/clamp-1/versions/1/").json()
    assert body["problem_statement"] == version.prompt
    assert body["reference_patch"].startswith("diff --git a/calc/ops.py")
    assert body["workspace"]["paths"] == sorted(BUGGY)
    assert body["workspace"]["digest"] == version.workspace_id
    suite = body["test_suite"]
    assert (suite["harness"], suite["fail_to_pass"], suite["pass_to_pass"]) == (
        "pytest-repo",
        FAIL_TO_PASS,
        PASS_TO_PASS,
    )
    assert suite["hidden_files"]["paths"] == ["tests/test_hidden.py"]
    assert suite["test_command"] == "pytest"
    assert [(r["id"], r["list"], r["with_patch"]) for r in body["test_results"]] == [
        (i, name, "")
        for name, ids in (("FAIL_TO_PASS", FAIL_TO_PASS), ("PASS_TO_PASS", PASS_TO_PASS))
        for i in ids
    ]
    task = client_for(viewer).get("/api/tasks/calc/clamp-1/").json()
    assert task["licence"] == "MIT" and task["metadata"]["package"] == "calc"


def test_an_api_edit_makes_a_version_and_the_diff_names_it(version, curator):
    client = client_for(curator)
    created = client.post(
        "/api/tasks/calc/clamp-1/versions/",
        {"change_note": "fewer ids", "pass_to_pass": PASS_TO_PASS[:1]},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["test_suite"]["pass_to_pass"] == PASS_TO_PASS[:1]
    diff = client.get("/api/tasks/calc/clamp-1/diff/?old=1&new=2").json()
    assert [c["field"] for c in diff["changes"]] == ["test_suite.pass_to_pass"]
    refused = client.post(
        "/api/tasks/calc/clamp-1/versions/",
        {"change_note": "no", "entry_point": "f"},
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "entry_point"
    assert "not editable on a repository task" in refused.json()["error"]
    bad = client.post(
        "/api/tasks/calc/clamp-1/versions/",
        {"change_note": "no", "fail_to_pass": ["tests/none.py::t"]},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "fail_to_pass"
    assert TaskVersion.objects.count() == 2


def test_the_schema_describes_the_repository_fields(viewer):
    schema = client_for(viewer).get("/api/schema/?format=json").json()
    detail = schema["components"]["schemas"]["TaskVersionDetail"]["properties"]
    assert {"workspace", "problem_statement", "reference_patch", "test_results"} <= set(detail)
    suite = schema["components"]["schemas"]["TestSuite"]["properties"]
    assert {"fail_to_pass", "pass_to_pass", "hidden_files", "test_command"} <= set(suite)


def test_the_workspace_reads_as_directories_and_files(version, viewer):
    client = client_for(viewer)
    url = "/api/tasks/calc/clamp-1/versions/1/files/"
    root = client.get(url).json()
    assert root["kind"] == "dir" and root["path"] == ""
    assert [d[0] for d in root["dirs"]] == ["calc", "tests"]
    assert [f[0] for f in root["files"]] == ["README.md"]
    ops = client.get(url, {"path": "calc/ops.py"}).json()
    assert ops["kind"] == "file" and ops["text"] == BUGGY["calc/ops.py"].decode()
    assert ops["size"] == len(BUGGY["calc/ops.py"]) and not ops["truncated"]
    missing = client.get(url, {"path": "calc/none.py"})
    assert missing.status_code == 404 and "calc/none.py" in str(missing.json())
