"""The login page says how accounts are made and names all five roles with what each does."""

import html

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_login_hint_names_every_role():
    page = html.unescape(Client().get("/accounts/login/").content.decode())
    hint = page[page.index('id="roles-hint"') :]
    for role in ("curator", "operator", "reviewer", "viewer", "admin"):
        assert f"--role {role}" in hint or f"<b>{role}</b>" in hint, role
    assert "create_user NAME --role" in hint
