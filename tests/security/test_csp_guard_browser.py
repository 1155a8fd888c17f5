"""The guard every browser test runs under (tests.browser.csp_guard): a page that breaks a
Content-Security-Policy fails the test, whether the browser reports it on its console or
through a ``securitypolicyviolation`` event; a page that keeps to it passes."""

import pytest
from playwright.sync_api import sync_playwright

from tests.browser import CHROMIUM, CHROMIUM_ARGS, browser_marks, pages_watched

pytestmark = browser_marks()

POLICY = '<meta http-equiv="Content-Security-Policy" content="script-src \'none\'">'
INLINE = f"data:text/html,{POLICY}<p>x</p><script>document.title = 'ran'</script>"
CLEAN = f"data:text/html,{POLICY}<p>no script here</p>"


def test_a_violation_fails_the_test_and_a_clean_page_passes():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        with pages_watched() as pages:
            page = browser.new_page()
            page.goto(CLEAN)
        assert pages == [page] and page.csp_violations == []
        with pytest.raises(pytest.fail.Exception, match="script-src"):
            with pages_watched():
                context = browser.new_context()
                page = context.new_page()
                page.goto(INLINE)
                page.wait_for_function("() => true")
        assert page.title() != "ran"
        assert any("CSP violation: script-src" in line for line in page.csp_violations)
        assert any("Content Security Policy" in line for line in page.csp_violations)
        page.csp_violations.clear()  # seen: the test's own guard must not fail it again
        browser.close()
