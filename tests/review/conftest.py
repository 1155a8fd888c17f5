"""The review's browser test runs on the console's daphne and chromium fixtures."""

from tests.console.conftest import browser_page, console_server, frontend_bundle  # noqa: F401
