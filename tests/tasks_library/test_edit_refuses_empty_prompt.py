"""An edit that empties the prompt is refused where it is made, naming the prompt: on the edit
page and through ``POST /api/tasks/<id>/versions/``; no version is created, so the latest stays
the one validation checked."""

import html

import pytest
from django.test import Client

from tasks_library.forms import EditForm
from tasks_library.models import TaskVersion
from tests.tasks_library.conftest import client_for

pytestmark = pytest.mark.django_db


def edit_data(version, **changes) -> dict:
    data = {k: ("" if v is None else v) for k, v in EditForm.initial_for(version).items()}
    return {**data, "change_note": "empty the prompt", **changes}


@pytest.mark.parametrize("prompt", ["", "   \n\t\n"])
def test_the_edit_page_refuses_an_empty_prompt_and_names_it(library, curator, prompt):
    client = Client()
    client.force_login(curator)
    response = client.post("/tasks/HumanEval/0/edit/", edit_data(library[0], prompt=prompt))
    page = html.unescape(response.content.decode())
    assert response.status_code == 200
    assert 'id="error-prompt"' in page and "prompt is empty" in page
    assert TaskVersion.objects.filter(task__task_id="HumanEval/0").count() == 1


@pytest.mark.parametrize("prompt", ["", "  \n"])
def test_the_api_refuses_an_empty_prompt_with_400_naming_the_field(library, curator, prompt):
    response = client_for(curator).post(
        "/api/tasks/HumanEval/0/versions/",
        {"change_note": "empty the prompt", "prompt": prompt},
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "prompt" and "prompt is empty" in body["error"]
    assert TaskVersion.objects.filter(task__task_id="HumanEval/0").count() == 1
