"""The edit page's errors speak the form's language: an error sits on the field it is about and
never names the importer's internal fields (``field 'test'``, ``'timeout_s'``); the API names its
own keys."""

import html
import re

import pytest
from django.test import Client

from tasks_library.forms import EditForm
from tests.tasks_library.conftest import client_for

pytestmark = pytest.mark.django_db
INTERNAL = re.compile(r"field '|'timeout_s'|\btimeout_s\b|'test'|test_timeout_s")


def post_edit(curator, version, **changes) -> str:
    client = Client()
    client.force_login(curator)
    data = {k: ("" if v is None else v) for k, v in EditForm.initial_for(version).items()}
    response = client.post(
        "/tasks/HumanEval/0/edit/", {**data, "change_note": "break it", **changes}
    )
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def errors(page: str) -> str:
    return " ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', page, re.S))


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"hidden_tests": "def check(candidate):\n    pass\n"}, "hidden_tests", "no assertion"),
        ({"hidden_tests": "def check(candidate:\n"}, "hidden_tests", "does not parse"),
        ({"visible_tests": "def check(candidate:\n"}, "visible_tests", "does not parse"),
        ({"timeout_s": "0"}, "timeout_s", "seconds"),
        ({"test_timeout_s": "999"}, "test_timeout_s", "seconds"),
    ],
)
def test_an_edit_error_sits_on_its_field_without_internal_names(
    library, curator, changes, field, says
):
    page = post_edit(curator, library[0], **changes)
    shown = errors(page)
    assert f'id="error-{field}"' in page and says in shown, shown
    assert not INTERNAL.search(shown), shown


def test_the_api_names_its_own_keys(library, curator):
    response = client_for(curator).post(
        "/api/tasks/HumanEval/0/versions/",
        {"change_note": "x", "hidden_tests": "def check(candidate):\n    pass\n"},
        format="json",
    )
    body = response.json()
    assert response.status_code == 400 and body["field"] == "hidden_tests"
    assert body["error"].startswith("hidden_tests: ") and "field '" not in body["error"]
