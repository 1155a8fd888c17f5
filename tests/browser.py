"""Shared setup of the browser tests: Debian's chromium driven by Playwright (DESIGN.md section
6)."""

from __future__ import annotations

import functools
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def browser_marks() -> list:
    """The marks of a browser test module: skipped without chromium, unless CI requires it.

    Raises:
        RuntimeError: ``CRUCIBLE_REQUIRE_BROWSER`` is set and chromium is missing.
    """
    marks = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
    if not Path(CHROMIUM).exists():
        if os.environ.get("CRUCIBLE_REQUIRE_BROWSER"):
            raise RuntimeError(
                f"CRUCIBLE_REQUIRE_BROWSER is set but {CHROMIUM} is missing: apt-get install "
                "chromium"
            )
        marks.append(
            pytest.mark.skip(reason="Debian chromium is not installed (apt-get install chromium)")
        )
    return marks


def off_loop(fn, *args, **kwargs):
    """Run ``fn`` in a plain thread: Playwright's sync API keeps an event loop in this one,
    where Django's ORM and async_to_sync refuse to run."""

    def call():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def sign_in(page, base_url: str, user) -> None:
    """Give ``page``'s browser a session of ``user`` (Django's ``force_login`` writes it to the
    test database daphne reads), as if they had signed in."""
    from django.test import Client  # noqa: PLC0415 (Django's test client, only where used)

    def session() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    page.context.add_cookies([{"name": "sessionid", "value": off_loop(session), "url": base_url}])


# Every Content-Security-Policy violation a page reports. A blocked script or style reaches no
# error handler: chromium says it on the console ("Refused to execute inline script because it
# violates the following Content Security Policy directive...") and fires a
# ``securitypolicyviolation`` event, which this script (injected by the browser's debugging
# protocol, so the policy does not block it) turns into one console line as well.
CSP_PROBE = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI || "inline"}`
    + ` in ${event.sourceFile || document.location.href}:${event.lineNumber}`);
});
"""
CSP_MARKERS = ("Content Security Policy", "CSP violation:")


def watch_page(page) -> None:
    """Collect ``page``'s JavaScript errors and CSP violations in ``page.errors`` and its CSP
    violations alone in ``page.csp_violations`` (read by :func:`csp_guard`)."""
    if hasattr(page, "csp_violations"):
        return
    page.errors = []
    page.csp_violations = []
    page.add_init_script(CSP_PROBE)

    def on_console(message) -> None:
        if any(marker in message.text for marker in CSP_MARKERS):
            page.csp_violations.append(message.text)
            page.errors.append(message.text)

    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", on_console)


@contextmanager
def pages_watched():
    """While open, every page a Playwright browser or context opens is watched
    (:func:`watch_page`); on leaving, fails the test when one of them reported a
    Content-Security-Policy violation."""
    from playwright.sync_api import Browser, BrowserContext  # noqa: PLC0415 (browser tests only)

    pages = []

    def watched(original):
        @functools.wraps(original)
        def new_page(self, *args, **kwargs):
            page = original(self, *args, **kwargs)
            watch_page(page)
            pages.append(page)
            return page

        return new_page

    originals = {cls: cls.new_page for cls in (Browser, BrowserContext)}
    for cls, original in originals.items():
        cls.new_page = watched(original)
    try:
        yield pages
    finally:
        for cls, original in originals.items():
            cls.new_page = original
    violations = [line for page in pages for line in page.csp_violations]
    if violations:
        pytest.fail(
            "Content-Security-Policy violations in the browser:\n" + "\n".join(violations),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def csp_guard(request):
    """Every test marked ``browser`` runs with :func:`pages_watched`: it fails on any
    Content-Security-Policy violation of any page it opened, however it made its pages."""
    if request.node.get_closest_marker("browser") is None:
        yield
        return
    with pages_watched():
        yield
