"""An entry point names a function: the edit API, the edit page and imports refuse anything else
("1 bad", code, a keyword), naming the field; nothing is written."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tasks_library.models import TaskVersion
from tasks_library.services import entry_point_problem
from tests.tasks_library.conftest import client_for, curator, library, roles  # noqa: F401

BAD = ["1 bad", "f(); import os", "has space", "", "   ", "class", "a-b", "x" * 201, "é\u200b"]
GOOD = ["has_close_elements", "script", "$jq", "_private", "f2", "é"]


@pytest.mark.parametrize("value", BAD)
def test_bad_entry_points_are_named(value):
    assert entry_point_problem(value)


@pytest.mark.parametrize("value", GOOD)
def test_function_names_pass(value):
    assert entry_point_problem(value) is None


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["1 bad", "f(); import os", "class"])
def test_the_edit_api_refuses_a_bad_entry_point(library, curator, value):
    before = TaskVersion.objects.count()
    response = client_for(curator).post(
        "/api/tasks/HumanEval/0/versions/",
        {"change_note": "rename", "entry_point": value},
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "entry_point" and "not a function name" in body["error"]
    assert TaskVersion.objects.count() == before


@pytest.mark.django_db
def test_an_import_refuses_a_bad_entry_point(humaneval, write_jsonl):
    row = {**humaneval[0], "entry_point": "1 bad"}
    with pytest.raises(CommandError, match="entry_point.*not a function name"):
        call_command(
            "import_tasks", "humaneval", "--path", str(write_jsonl([row])), stdout=StringIO()
        )
    assert TaskVersion.objects.count() == 0
