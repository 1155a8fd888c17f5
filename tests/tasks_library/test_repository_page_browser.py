"""In a real browser: a repository task's workspace is browsed by clicking (root, a directory, a
file), and a file holding a script shows as text: the script never runs."""

import pytest

from tasks_library.repositories import repository_tasks_import
from tests.browser import browser_marks, off_loop, sign_in
from tests.console.conftest import browser_page, console_server, frontend_bundle  # noqa: F401
from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixtures)
from tests.tasks_library.repository_helpers import BUGGY, record

pytestmark = browser_marks()
HOSTILE = "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>\n"


@pytest.fixture
def viewer(roles):
    def make():
        repository_tasks_import(
            [record(files={**BUGGY, "calc/hostile.html": HOSTILE.encode()})], author="alice"
        )
        return make_user("vic", "viewers")

    return off_loop(make)


def test_the_tree_is_browsed_by_clicking_and_a_hostile_file_stays_text(
    viewer, console_server, browser_page
):
    page = browser_page
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, console_server, viewer)
    page.goto(f"{console_server}/tasks/calc/clamp-1/")
    page.wait_for_selector("#file-tree")
    page.click("#file-tree >> text=calc/")
    page.wait_for_selector("#file-tree >> text=ops.py")
    page.click("#file-tree >> text=ops.py")
    page.wait_for_selector("#file-view")
    assert "def clamp(x, low, high):" in page.inner_text("#file-view")
    page.click("#crumbs >> text=calc")
    page.click("#file-tree >> text=hostile.html")
    page.wait_for_selector("#file-view")
    assert page.inner_text("#file-view") == HOSTILE
    assert page.title() != "owned" and dialogs == []
    assert page.locator("#file-view img, #file-view script").count() == 0
    assert "clamp(50, 0, 10) returns 50" in page.inner_text("#problem-statement")
