"""A repository task's page: problem statement, a browsable file tree (file contents escaped),
FAIL_TO_PASS / PASS_TO_PASS with their last validation results, the reference patch as a diff;
the edit form makes new versions."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.conftest import make_user
from tests.tasks_library.repository_helpers import BUGGY, FAIL_TO_PASS, PASS_TO_PASS, record

SCRIPT = "<script>alert('owned')</script>"


@pytest.fixture
def version(db) -> TaskVersion:
    files = {**BUGGY, "calc/evil.py": f"# {SCRIPT}\n".encode(), "blob.bin": b"\xff\xfe\x00"}
    repository_tasks_import(
        [record(files=files, problem_statement=f"clamp is wrong {SCRIPT}")], author="alice"
    )
    version = TaskVersion.objects.get()
    per_id = dict.fromkeys(FAIL_TO_PASS + PASS_TO_PASS, "passed")
    without = {**per_id, FAIL_TO_PASS[0]: "failed", PASS_TO_PASS[2]: "error"}
    TaskVersion.objects.filter(pk=version.pk).update(
        verdict="wrong_test_lists",
        report={
            "reference": {
                "runs": 3,
                "passed_runs": 3,
                "statuses": ["ok"] * 3,
                "wall_ms_median": 300,
                "per_id": per_id,
            },
            "empty_patch": {
                "status": "ok",
                "per_id": without,
                "fail_to_pass_passing": [],
                "pass_to_pass_failing": [PASS_TO_PASS[2]],
            },
        },
    )
    return version


@pytest.fixture
def client(roles) -> Client:
    client = Client()
    client.force_login(make_user("vic", "viewers"))
    return client


def page(client, **query) -> str:
    response = client.get(reverse("task-detail", args=["calc/clamp-1"]), query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_statement_tests_and_patch(version, client):
    html = page(client)
    assert "clamp is wrong &lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in html
    assert SCRIPT not in html
    assert '<tr data-list="FAIL_TO_PASS"><td>FAIL_TO_PASS</td><td><code>' in html
    rows = html.split('id="repository-tests"')[1].split("</table>")[0]
    assert rows.count("<tr data-list=") == 4
    fail_row = rows.split(FAIL_TO_PASS[0])[1].split("</tr>")[0]
    assert 'class="result-passed">passed' in fail_row and 'class="result-failed">failed' in fail_row
    mean_row = rows.split(PASS_TO_PASS[2])[1].split("</tr>")[0]
    assert 'class="result-error">error' in mean_row and "(expected passed)" in mean_row
    patch = html.split('id="reference-patch">')[1].split("</pre>")[0]
    assert '<span class="del">-    return max(low, x)</span>' in patch
    assert '<span class="add">+    return max(low, min(x, high))</span>' in patch
    assert "1 PASS_TO_PASS ids fail without it" in html


def test_the_file_tree_browses_directories_and_escapes_files(version, client):
    root = page(client)
    tree = root.split('id="file-tree"')[1].split("</table>")[0]
    assert "path=calc#files" in tree and ">calc/</a>" in tree and "3 files" in tree
    assert ">README.md</a>" in tree and ">blob.bin</a>" in tree
    listing = page(client, path="calc")
    assert ">ops.py</a>" in listing and "path=calc/ops.py" in listing
    source = page(client, path="calc/ops.py")
    view = source.split('id="file-view" data-path="calc/ops.py">')[1].split("</pre>")[0]
    text = re.sub(r"<[^>]+>", "", view)  # the highlighted tokens' text, line after line
    assert "def clamp(x, low, high):" in text and "return max(low, x)" in text
    assert '<span class="k">def</span>' in view and 'id="L5"' in view  # highlighted, numbered
    hostile = page(client, path="calc/evil.py")
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in hostile
    assert SCRIPT not in hostile
    assert 'id="binary-file"' in page(client, path="blob.bin")
    missing = page(client, path="calc/nothing.py")
    assert "no file or directory &#x27;calc/nothing.py&#x27;" in missing
    assert 'id="file-tree"' in missing  # back at the root


def test_a_curator_edits_the_lists_into_a_new_version(version, roles):
    client = Client()
    client.force_login(make_user("cora", "curators"))
    url = reverse("task-edit", args=["calc/clamp-1"])
    form = client.get(url).content.decode()
    assert 'name="fail_to_pass"' in form and 'name="entry_point"' not in form
    response = client.post(
        url,
        {
            "base": 1,
            "prompt": version.prompt,
            "reference_solution": version.reference_solution,
            "fail_to_pass": "\n".join(FAIL_TO_PASS),
            "pass_to_pass": "\n".join(PASS_TO_PASS[:2]) + "\n",
            "test_command": "pytest -q",
            "timeout_s": "60",
            "change_note": "test_mean errors without the fix too",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    new = TaskVersion.objects.get(number=2)
    assert new.test_suite.pass_to_pass == PASS_TO_PASS[:2]
    assert new.test_suite.test_command == "pytest -q" and new.test_suite.timeout_s == 60.0
    assert new.workspace_id == version.workspace_id
    refused = client.post(
        url,
        {
            "base": 2,
            "prompt": version.prompt,
            "reference_solution": "not a diff",
            "fail_to_pass": "\n".join(FAIL_TO_PASS),
            "pass_to_pass": "",
            "test_command": "pytest -q",
            "timeout_s": "60",
            "change_note": "break it",
        },
    )
    assert refused.status_code == 200
    assert "not a unified diff" in refused.content.decode()
    assert TaskVersion.objects.count() == 2
