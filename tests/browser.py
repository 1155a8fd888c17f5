"""Shared setup of the browser tests: Debian's chromium driven by Playwright (DESIGN.md section
6)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
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
