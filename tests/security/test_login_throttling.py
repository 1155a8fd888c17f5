"""Sign-in throttling (django-axes): wrong passwords for one account from one address lock it out
after CRUCIBLE_LOGIN_FAILURE_LIMIT tries, on the login form and on the API's HTTP Basic alike;
the right password is then refused too until the cool-off; every failure and the lockout are
logged."""

from __future__ import annotations

import base64
import logging

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from tests.tasks_library.conftest import PASSWORD, make_user, roles  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
LIMIT = 3  # the default is 10 (settings); fewer tries keep the test fast (a hash per try)


@pytest.fixture(autouse=True)
def small_limit(settings):
    assert settings.AXES_FAILURE_LIMIT == 10
    settings.AXES_FAILURE_LIMIT = LIMIT


def basic(username: str, password: str) -> dict:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_the_login_form_locks_out_after_the_limit_and_logs(roles, caplog):
    make_user("vic", "viewers")
    limit = LIMIT
    client = Client()
    caplog.set_level(logging.WARNING, logger="axes")
    answers = [
        client.post("/accounts/login/", {"username": "vic", "password": f"wrong{i}"}).status_code
        for i in range(limit + 5)
    ]
    assert answers[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert set(answers[limit:]) == {429}
    locked = client.post("/accounts/login/", {"username": "vic", "password": PASSWORD})
    assert locked.status_code == 429 and "too many failed sign-ins" in locked.content.decode()
    assert int(locked["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    failures = [r for r in caplog.records if "login failure by" in r.getMessage()]
    assert len(failures) >= limit, [r.getMessage() for r in caplog.records]
    assert 'username: "vic"' in failures[0].getMessage()  # an operator can tell who
    assert any("Locking out" in r.getMessage() for r in caplog.records)
    # Another account from the same address is not locked.
    make_user("cora", "curators")
    assert (
        client.post("/accounts/login/", {"username": "cora", "password": PASSWORD}).status_code
        == 302
    )


def test_http_basic_locks_out_after_the_limit(roles, caplog):
    make_user("vic", "viewers")
    limit = LIMIT
    caplog.set_level(logging.WARNING, logger="axes")
    client = APIClient()
    answers = [
        client.get("/api/task-versions/", **basic("vic", f"wrong{i}")).status_code
        for i in range(limit + 5)
    ]
    assert answers[: limit - 1] == [401] * (limit - 1)
    assert set(answers[limit:]) == {429}
    locked = client.get("/api/task-versions/", **basic("vic", PASSWORD))
    assert locked.status_code == 429
    assert "too many failed sign-ins" in locked.json()["error"]
    assert any("Locking out" in r.getMessage() for r in caplog.records)


def test_wrong_basic_credentials_answer_401_with_a_challenge(roles):
    make_user("vic", "viewers")
    refused = APIClient().get("/api/task-versions/", **basic("vic", "nope"))
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Basic realm="crucible"'
    anonymous = APIClient().get("/api/task-versions/")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == 'Bearer realm="crucible"'
    ok = APIClient().get("/api/task-versions/", **basic("vic", PASSWORD))
    assert ok.status_code == 200
