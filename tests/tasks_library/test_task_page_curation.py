"""A task's own page has the curation controls: a curator quarantines, confirms or approves the
version on screen, an older one as well as the latest, with a written reason; viewers see no
control and are refused."""

import html

import pytest
from django.test import Client

from tasks_library.models import TaskVersion
from tasks_library.services import task_version_edit

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_versions(library):
    v1 = library[0]
    v2 = task_version_edit(
        version=v1,
        author="cora",
        change_note="tidy",
        reference_solution=v1.reference_solution + "\n",
    )
    TaskVersion.objects.filter(pk=v2.pk).update(verdict="valid")
    return v1, TaskVersion.objects.get(pk=v2.pk)


def test_a_curator_quarantines_and_approves_an_older_version_from_its_page(two_versions, curator):
    v1, v2 = two_versions
    client = signed_in(curator)
    page = html.unescape(client.get("/tasks/HumanEval/0/?v=1").content.decode())
    assert 'id="curate-form"' in page and 'name="number" value="1"' in page
    assert 'id="quarantine-button"' in page and 'id="approve-button"' not in page

    refused = client.post(
        "/tasks/HumanEval/0/curate/", {"number": 1, "action": "quarantine", "reason": ""}
    )
    assert refused.status_code == 302
    assert not TaskVersion.objects.get(pk=v1.pk).quarantined
    shown = html.unescape(client.get(refused["Location"]).content.decode())
    assert "reason: write why" in shown

    done = client.post(
        "/tasks/HumanEval/0/curate/",
        {"number": 1, "action": "quarantine", "reason": "v1's tests miss negatives"},
    )
    assert done.status_code == 302 and done["Location"] == "/tasks/HumanEval/0/?v=1"
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert v1.quarantined and v1.quarantine_reason == "v1's tests miss negatives"
    assert v1.curated_by == "cora" and not v2.quarantined

    page = html.unescape(client.get("/tasks/HumanEval/0/?v=1").content.decode())
    assert 'id="approve-button"' in page and 'id="confirm-button"' in page

    client.post(
        "/tasks/HumanEval/0/curate/",
        {"number": 1, "action": "quarantine", "reason": "confirmed: the negatives are missing"},
    )
    v1.refresh_from_db()
    assert v1.quarantined and v1.quarantine_reason == "confirmed: the negatives are missing"

    client.post(
        "/tasks/HumanEval/0/curate/",
        {"number": 1, "action": "approve", "reason": "negatives are out of scope"},
    )
    v1.refresh_from_db()
    assert not v1.quarantined and v1.override_reason == "negatives are out of scope"


def test_viewers_see_no_control_and_cannot_curate(two_versions, viewer):
    client = signed_in(viewer)
    page = client.get("/tasks/HumanEval/0/?v=1").content.decode()
    assert 'id="curate-form"' not in page
    response = client.post(
        "/tasks/HumanEval/0/curate/", {"number": 1, "action": "quarantine", "reason": "no"}
    )
    assert response.status_code == 403
    assert not TaskVersion.objects.get(pk=two_versions[0].pk).quarantined
