"""A Content-Security-Policy on every page, and the console's scripts (its own, plotly.js, the
import map of the unbundled sources, the task page's inline script, Swagger UI) run under it in a
real browser with no violation reported."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.browser import browser_marks, off_loop, sign_in
from tests.console.conftest import (  # noqa: F401 (fixtures)
    browser_page,
    console_server,
    console_server_unbundled,
    frontend_bundle,
)
from tests.tasks_library.conftest import library, roles  # noqa: F401 (fixtures)

PAGES = ["/", "/trajectories/", "/tasks/", "/tasksets/", "/sandboxes/", "/api/docs/", "/review/"]


def directives(header: str) -> dict[str, list[str]]:
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.django_db
def test_every_page_carries_the_policy(library, settings):
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@x.org", "pw"))
    for path in [*PAGES, "/tasks/HumanEval/0/", "/accounts/login/", "/account/api-keys/"]:
        response = client.get(path)
        assert response.status_code == 200, path
        policy = directives(response["Content-Security-Policy"])
        assert policy["default-src"] == ["'self'"], path
        assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
        script = policy["script-src"]
        assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script, path
    # Unbundled, the import map (an inline script) carries the nonce too.
    settings.FRONTEND_BUNDLED = False
    page = client.get("/")
    nonce = re.search(r"<script type=\"importmap\" nonce=\"([^\"]+)\">", page.content.decode())
    assert f"'nonce-{nonce.group(1)}'" in directives(page["Content-Security-Policy"])["script-src"]
    # The task page's inline script carries the nonce of its response's policy.
    page = client.get("/tasks/HumanEval/0/")
    nonce = re.search(r"<script nonce=\"([^\"]+)\">", page.content.decode()).group(1)
    assert f"'nonce-{nonce}'" in directives(page["Content-Security-Policy"])["script-src"]


def _visit_every_page(page, server: str) -> None:
    user = off_loop(lambda: User.objects.create_superuser("root", "r@x.org", "pw"))
    sign_in(page, server, user)
    for path in PAGES:
        page.goto(f"{server}{path}")
        page.wait_for_load_state("networkidle")
    page.goto(f"{server}/api/docs/")
    page.wait_for_selector("text=/api/runs/{run_id}/cancel/", timeout=20000)
    # The task page's inline script (with the nonce) runs: picking two versions fills the box.
    page.goto(f"{server}/tasks/HumanEval/0/")
    page.locator("#diff-form input[name=old_n]").first.check()
    page.locator("#diff-form input[name=new_n]").last.check()
    assert page.input_value("#diff-spec") == "1..1"
    assert page.errors == [], page.errors


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_violation_in_a_browser_bundled(library, console_server, browser_page):
    pytestmark_check()
    _visit_every_page(browser_page, console_server)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_violation_in_a_browser_unbundled(library, console_server_unbundled, browser_page):
    pytestmark_check()
    _visit_every_page(browser_page, console_server_unbundled)


def pytestmark_check() -> None:
    for mark in browser_marks():
        if mark.name == "skip":
            pytest.skip(mark.kwargs["reason"])
