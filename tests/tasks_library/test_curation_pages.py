"""The curation pages through Django's test client: sign-in, roles, list, task page, edit, bulk
actions, task sets."""

import html

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tasks_library.models import TaskSet, TaskVersion
from tests.tasks_library.conftest import PASSWORD, many_versions


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.mark.django_db
def test_anonymous_users_are_sent_to_the_login_page_and_can_sign_in(library, viewer):
    client = Client()
    for url in (
        "/tasks/",
        "/tasks/HumanEval/0/",
        "/tasks/HumanEval/0/edit/",
        "/tasksets/",
        "/tasksets/lib/",
    ):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(
            "/accounts/login/?next="
        ), url
    assert client.get("/accounts/login/").status_code == 200
    response = client.post(
        "/accounts/login/", {"username": "vic", "password": PASSWORD, "next": "/tasks/"}
    )
    assert response.status_code == 302 and response["Location"] == "/tasks/"
    page = client.get("/tasks/")
    assert (
        page.status_code == 200 and "HumanEval/0" in text(page) and 'id="whoami">vic<' in text(page)
    )
    wrong = Client().post("/accounts/login/", {"username": "vic", "password": "nope"})
    assert wrong.status_code == 200 and "enter a correct username and password" in text(wrong)


@pytest.mark.django_db
def test_viewer_reads_every_page_but_gets_no_forms(library, viewer):
    client = signed_in(viewer)
    page = text(client.get("/tasks/"))
    assert all(f"HumanEval/{i}" in page for i in range(3))
    assert 'class="badge verdict-valid"' in page and 'class="badge quarantined"' in page
    assert (
        library[0].content_hash[:12] in page
        and "easy" in page
        and "(9/10)" in page
        and ">lists<" in page
    )
    assert 'id="bulk"' not in page and 'name="ids"' not in page and 'id="pin-form"' not in page

    filtered = text(client.get("/tasks/", {"verdict": "valid"}))
    assert (
        "HumanEval/0" in filtered
        and "HumanEval/1" not in filtered
        and "HumanEval/2" not in filtered
    )
    assert "HumanEval/1" in text(client.get("/tasks/", {"status": "quarantined"}))
    assert "HumanEval/0" not in text(client.get("/tasks/", {"status": "quarantined"}))
    bad = client.get("/tasks/", {"verdict": "splendid"})
    assert bad.status_code == 200 and "verdict: Select a valid choice" in text(bad)

    task = text(client.get("/tasks/HumanEval/1/"))
    version = library[1]
    assert version.prompt.strip() in task and version.reference_solution.strip() in task
    assert (
        version.test_suite.hidden_tests.strip() in task
        and version.test_suite.visible_tests.strip() in task
    )
    assert "automatic: broken_reference" in task and "AssertionError" in task and "assert_1" in task
    assert (
        "0/7 tests passed" in task
        and "3 of 4 mutants killed" in task
        and "line 4: '<' became '<='" in task
    )
    assert "line 9: <code>separate('(a)') == ['(b)']</code>" in task and "got ['(a)']" in task
    assert 'id="edit-link"' not in task and 'id="validate-button"' not in task

    assert client.get("/tasks/HumanEval/0/edit/").status_code == 403
    assert client.post("/tasks/HumanEval/0/validate/").status_code == 403
    assert (
        client.post(
            "/tasks/", {"action": "quarantine", "ids": [library[0].pk], "reason": "x"}
        ).status_code
        == 403
    )
    assert client.post("/tasksets/", {"name": "x", "change_note": "x"}).status_code == 403
    assert not TaskVersion.objects.get(pk=library[0].pk).quarantined

    sets = text(client.get("/tasksets/"))
    assert ">lib<" in sets and 'id="pin-form"' not in sets
    detail = text(client.get("/tasksets/lib/"))
    assert "HumanEval/2" in detail and "imported from humaneval" in detail


@pytest.mark.django_db
def test_unknown_tasks_and_versions_are_404(library, curator):
    client = signed_in(curator)
    assert client.get("/tasks/Nope/9/").status_code == 404
    assert client.get("/tasks/Nope/9/edit/").status_code == 404
    assert client.get("/tasks/HumanEval/0/", {"v": 42}).status_code == 404
    assert client.get("/tasksets/nothing/").status_code == 404


@pytest.mark.django_db
def test_curator_edits_and_sees_the_new_version_and_its_diff(library, curator):
    client = signed_in(curator)
    form = client.get("/tasks/HumanEval/0/edit/")
    assert form.status_code == 200
    body = text(form)
    old = library[0]
    assert (
        old.reference_solution in body
        and old.test_suite.hidden_tests in body
        and old.prompt in body
    )

    data = {
        "prompt": old.prompt,
        "entry_point": old.entry_point,
        "reference_solution": old.reference_solution.replace("distance", "gap"),
        "visible_tests": old.test_suite.visible_tests,
        "hidden_tests": old.test_suite.hidden_tests,
        "timeout_s": old.test_suite.timeout_s,
        "change_note": "rename distance to gap",
        "base": 1,
    }
    response = client.post("/tasks/HumanEval/0/edit/", data)
    assert (
        response.status_code == 302 and response["Location"] == "/tasks/HumanEval/0/?v=2&diff=1..2"
    )
    new = TaskVersion.objects.get(task__task_id="HumanEval/0", number=2)
    assert (
        new.author == "cora" and new.parent_id == old.pk and new.test_suite_id == old.test_suite_id
    )

    page = client.get(response["Location"])
    content = page.content.decode()
    assert "created HumanEval/0 v2" in text(page) and "rename distance to gap" in text(page)
    assert '<section id="diff">' in content and "<h3>reference_solution</h3>" in content
    assert '<span class="del">-' in content and "distance" in content
    assert '<span class="add">+' in content and "gap = abs" in content
    bad = text(client.get("/tasks/HumanEval/0/", {"diff": "1-2"}))
    assert (
        "diff: write it as &lt;old&gt;..&lt;new&gt;" in bad
        or "diff: write it as <old>..<new>" in bad
    )
    assert "has no version 7" in text(client.get("/tasks/HumanEval/0/", {"diff": "1..7"}))


@pytest.mark.django_db
def test_edit_error_is_shown_beside_the_form_with_the_input_kept(library, curator):
    client = signed_in(curator)
    old = library[0]
    data = {
        "prompt": old.prompt,
        "entry_point": old.entry_point,
        "reference_solution": old.reference_solution,
        "visible_tests": old.test_suite.visible_tests,
        "hidden_tests": "def check(candidate):\n    pass  # MY INPUT\n",
        "timeout_s": old.test_suite.timeout_s,
        "change_note": "drop the tests",
        "base": 1,
    }
    response = client.post("/tasks/HumanEval/0/edit/", data)
    assert response.status_code == 200
    page = text(response)
    assert 'id="error-hidden_tests"' in page and "the tests contain no assertion" in page
    assert "pass  # MY INPUT" in page and 'value="drop the tests"' in page
    assert TaskVersion.objects.count() == 3

    # A browser sends textareas with CRLF line ends: unchanged content is still "nothing changed".
    crlf = {
        **data,
        "hidden_tests": old.test_suite.hidden_tests.replace("\n", "\r\n"),
        "prompt": old.prompt.replace("\n", "\r\n"),
    }
    page = text(client.post("/tasks/HumanEval/0/edit/", crlf))
    assert "nothing changed: this content is already HumanEval/0 v1" in page
    missing_note = text(client.post("/tasks/HumanEval/0/edit/", {**data, "change_note": ""}))
    assert 'id="error-change_note"' in missing_note
    assert TaskVersion.objects.count() == 3


@pytest.mark.django_db
def test_bulk_quarantine_and_approve_from_the_list(library, curator):
    client = signed_in(curator)
    assert 'id="bulk"' in text(client.get("/tasks/"))
    ids = [library[0].pk, library[2].pk]
    response = client.post(
        "/tasks/",
        {"action": "quarantine", "ids": ids, "reason": "", "verdict": "valid"},
        follow=True,
    )
    assert "reason: write why these versions are quarantined" in text(response)
    assert (
        response.redirect_chain[-1][0] == "/tasks/?verdict=valid"
    )  # the filter survives the action
    assert not TaskVersion.objects.filter(pk__in=ids, quarantined=True).exists()

    response = client.post(
        "/tasks/", {"action": "quarantine", "ids": ids, "reason": "tests too lenient"}, follow=True
    )
    assert "quarantined 2 task versions: tests too lenient" in text(response)
    held = TaskVersion.objects.get(pk=library[0].pk)
    assert (
        held.quarantined
        and held.curated_by == "cora"
        and held.quarantine_reason == "tests too lenient"
    )

    response = client.post(
        "/tasks/", {"action": "approve", "ids": [library[2].pk], "reason": "ok"}, follow=True
    )
    assert (
        "validate first" in text(response) and TaskVersion.objects.get(pk=library[2].pk).quarantined
    )
    response = client.post(
        "/tasks/",
        {"action": "approve", "ids": [library[0].pk], "reason": "looked again"},
        follow=True,
    )
    assert "approved 1 task version: looked again" in text(response)
    assert not TaskVersion.objects.get(pk=library[0].pk).quarantined
    assert "select at least one" in text(
        client.post("/tasks/", {"action": "approve", "reason": "x"}, follow=True)
    )


@pytest.mark.django_db
def test_validate_button_enqueues_and_says_so(library, curator, eager_celery):
    client = signed_in(curator)
    response = client.post("/tasks/HumanEval/2/validate/", {"number": 1}, follow=True)
    assert "validation of HumanEval/2 v1 enqueued" in text(response)
    assert TaskVersion.objects.get(pk=library[2].pk).verdict != "pending"  # eager: it ran here
    page = text(client.get("/tasks/HumanEval/2/"))
    assert (
        "5 of 5 runs passed" in page
        and "mutants killed" in page
        and "not validated yet" not in page
    )


@pytest.mark.django_db
def test_curator_pins_a_task_set_from_a_filter(library, curator):
    client = signed_in(curator)
    assert 'id="pin-form"' in text(client.get("/tasksets/"))
    response = client.post(
        "/tasksets/",
        {
            "name": "valid-only",
            "change_note": "first cut",
            "verdict": "valid",
            "trainable_only": "on",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/tasksets/valid-only/"
    page = text(client.get("/tasksets/valid-only/"))
    assert (
        "HumanEval/0" in page
        and "HumanEval/1" not in page
        and "first cut" in page
        and "cora" in page
    )
    response = client.post(
        "/tasksets/", {"name": "valid-only", "change_note": "everything"}, follow=True
    )
    assert "task set valid-only pins 3 task versions" in text(response)
    assert TaskSet.objects.get(name="valid-only").versions.count() == 2
    refused = client.post("/tasksets/", {"name": "bad name", "change_note": "x"}, follow=True)
    assert (
        "name: a new task set's name is 1 to 100 letters" in text(refused)
        and not TaskSet.objects.filter(name="bad name").exists()
    )
    empty = client.post(
        "/tasksets/",
        {"name": "none", "change_note": "x", "status": "quarantined", "trainable_only": "on"},
        follow=True,
    )
    assert "nothing pinned" in text(empty) and not TaskSet.objects.filter(name="none").exists()


@pytest.mark.django_db
def test_list_page_query_count_does_not_grow_with_the_number_of_tasks(curator):
    client = signed_in(curator)
    many_versions(tasks=5)
    with CaptureQueriesContext(connection) as few:
        assert client.get("/tasks/").status_code == 200
    many_versions(tasks=115, prefix="More")
    with CaptureQueriesContext(connection) as many:
        response = client.get("/tasks/", {"page": 2})
    assert (
        response.status_code == 200
        and "page 2 of 3" in text(response)
        and text(response).count('name="ids"') == 50
    )
    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]
