"""In a real browser: the login page names the roles; a refused page is a console page whose back
link returns where one came from; the navigation's "API docs" opens the Swagger page, which lists
the write API (runs launch, cancel, resume; review queues and labels; task-set pins)."""

from pathlib import Path

from tests.browser import browser_marks, off_loop, sign_in
from tests.review.review_seed import make_roles, make_user

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()


def test_login_refusal_and_api_docs(console_server, browser_page):
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{console_server}/accounts/login/")
    hint = page.inner_text("#roles-hint")
    assert all(role in hint for role in ("curator", "operator", "reviewer", "viewer", "admin"))
    page.screenshot(path=str(ARTIFACTS / "login.png"))

    viewer = off_loop(lambda: (make_roles(), make_user("vic", "viewer"))[1])
    sign_in(page, console_server, viewer)
    page.goto(f"{console_server}/")
    page.goto(f"{console_server}/runs/new/")
    assert "may launch runs" in page.inner_text("#forbidden")
    assert "signed in as vic (viewers)" in page.inner_text("#forbidden")
    page.screenshot(path=str(ARTIFACTS / "forbidden.png"))
    page.click("#back-link")
    page.wait_for_url(f"{console_server}/")

    page.click("header nav a:text('API docs')")
    page.wait_for_url(f"{console_server}/api/docs/")
    page.wait_for_selector("text=/api/runs/{run_id}/cancel/", timeout=20000)
    for path in (
        "/api/runs/",
        "/api/runs/{run_id}/resume/",
        "/api/review/queues/",
        "/api/review/items/{item_id}/label/",
        "/api/task-sets/{name}/pin/",
        "/api/validation-jobs/{job_id}/",
    ):
        assert page.locator(f"text={path}").count() >= 1, path
    page.screenshot(path=str(ARTIFACTS / "api_docs.png"))
    assert page.errors == []
