"""In a real browser: an environment version's page follows its build without a reload (its
script once ran inline without the CSP nonce, and the page said "building / queued" until a
reload): queued when a curator clicks build, then built, as the build job runs (here: the
worker's task run in this process, the store real); the facts say when the layers were built,
and the author line never prints "?"."""

import json
from pathlib import Path

import pytest

from core.queues import VALIDATION
from sandboxes import queue as Q
from tasks_library.environments import environment_create
from tasks_library.services import environment_default_python
from tasks_library.tasks import build_environment_task
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.conftest import browser_page, console_server, frontend_bundle  # noqa: F401
from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixtures)

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()


@pytest.fixture
def no_queued_build():
    """The build a test queues for real (the build button through daphne) leaves no message in
    the ``validation`` queue, where a later test's worker would take it."""
    yield
    redis = Q.connection()
    for raw in redis.lrange(VALIDATION, 0, -1):
        if json.loads(raw)["headers"]["task"].endswith("build_environment_task"):
            redis.lrem(VALIDATION, 1, raw)


def test_the_build_appears_live_and_the_author_is_named(
    roles, no_queued_build, console_server, browser_page
):
    def setup():
        curator = make_user("cora", "curators")
        plain = environment_create(
            name="plain", runtime="python3.11", packages=[], author="cora", change_note="host"
        )
        return curator, plain, environment_default_python()

    curator, plain, default = off_loop(setup)
    page = browser_page
    sign_in(page, console_server, curator)
    page.goto(f"{console_server}/environments/{default.pk}/")
    assert "by ?" not in page.inner_text("main")
    assert "by crucible" in page.inner_text("main")
    page.goto(f"{console_server}/environments/{plain.pk}/")
    page.wait_for_selector("#build-live:text('live')", timeout=15000)
    assert page.inner_text("#build-status") == "not built"
    page.click("#build-again")
    page.wait_for_selector("#build-live:text('live')", timeout=15000)
    assert page.inner_text("#build-status") == "building"
    assert page.inner_text("#build-log") == "queued"
    page.evaluate("window.stillTheSamePage = true")

    off_loop(build_environment_task.run, plain.pk)
    page.wait_for_selector("#build-status:text('built')", timeout=10000)
    assert page.evaluate("window.stillTheSamePage === true")  # no reload
    assert "host-python3.11" in page.inner_text("#build-facts")
    assert "UTC" in page.inner_text("#build-facts")
    assert page.inner_text("#build-again") == "build again (a cache hit)"
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "environment_build_live.png"))
    assert page.errors == []
