"""A refusal is a console page: the navigation, what was refused and why, and a way back (the page
one came from, the start page, signing in as someone else), never bare text."""

import html

import pytest
from django.test import Client, override_settings

from tests.review.review_seed import make_roles, make_user, seed_run

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_console_page(response, says: str) -> str:
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    page = html.unescape(response.content.decode())
    assert "<nav" in page and 'class="brand"' in page, page[:300]
    assert 'id="forbidden"' in page and says in page
    assert 'id="back-link"' in page and 'id="home-link"' in page and 'id="switch-user"' in page
    return page


def test_a_refused_write_is_a_page_with_a_way_back(humaneval):
    make_roles()
    run, _versions = seed_run(humaneval, tasks=1)
    viewer = signed_in(make_user("vic", "viewer"))
    response = viewer.post(
        f"/runs/{run.pk}/cancel/", HTTP_REFERER=f"http://testserver/runs/{run.pk}/"
    )
    page = assert_console_page(response, "only curators and operators may cancel runs")
    assert f'id="back-link" href="/runs/{run.pk}/"' in page
    assert_console_page(viewer.get("/runs/new/"), "may launch runs")
    assert_console_page(viewer.get("/review/queues/new/"), "may create review queues")
    assert_console_page(
        viewer.post("/tasks/", {"action": "quarantine", "ids": [1], "reason": "x"}),
        "only curators may change the task library",
    )


def test_a_back_link_never_leaves_the_console(humaneval):
    make_roles()
    viewer = signed_in(make_user("vic", "viewer"))
    page = assert_console_page(
        viewer.get("/runs/new/", HTTP_REFERER="https://evil.example/phish"), "may launch runs"
    )
    assert "evil.example" not in page


@override_settings(CRUCIBLE_CONSOLE_PUBLIC=False)
def test_a_user_without_a_role_gets_the_page_saying_whom_to_ask():
    nobody = signed_in(make_user("nobody", None))
    assert_console_page(nobody.get("/"), "ask an admin")
