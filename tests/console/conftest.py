"""Fixtures of the console's browser tests: daphne against the test database, a chromium page."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.management.stack import http_up
from core.frontend import ensure_build
from tests.browser import CHROMIUM, CHROMIUM_ARGS, watch_page
from tests.database import child_env
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def frontend_bundle() -> bool:
    """The console's front-end build brought up to date as ``./crucible test`` does (npm ci and npm
    run build when stale, where npm is installed); True when the bundle is what daphne will
    serve."""
    return ensure_build()


@pytest.fixture(scope="module")
def console_server(frontend_bundle, django_db_setup):
    """daphne serving the console against the test database and the session's Redis: one per
    test module (every test of the module reads the same test database through it)."""
    yield from serve_console()


@pytest.fixture(scope="module")
def console_server_unbundled(django_db_setup):
    """daphne serving the console's unbundled sources and the plotly wheel's plotly.js (what a
    machine without Node serves); one per test module."""
    yield from serve_console(CRUCIBLE_FRONTEND_BUILD="false")


def serve_console(**env_extra: str):
    port = free_port()
    env = child_env(**env_extra)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "console.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while not http_up(port):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "daphne did not start"
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def browser_page():
    """A chromium page (1440 x 900) that collects the page's JavaScript errors and
    Content-Security-Policy violations in ``page.errors`` (:func:`tests.browser.watch_page`; the
    autouse :func:`tests.browser.csp_guard` fails the test on a violation)."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (only browser tests load it)

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        watch_page(page)
        yield page
        browser.close()
