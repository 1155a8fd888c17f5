"""In a real browser, the pages a newcomer found broken: the queue form's selects show their whole
text (they were cut off), the API keys table is styled as the console's tables are and a new key
has a Copy button that puts it on the clipboard."""

from pathlib import Path

from django.contrib.auth.models import User

from tests.browser import browser_marks, off_loop, sign_in
from tests.review.review_seed import make_roles

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()

# Each single select's widest option, measured in its own font, against the room inside it (an
# arrow and padding take about 28 px of a select).
CUT_SELECTS = """() => Array.from(document.querySelectorAll("#queue-form select:not([multiple])"))
  .map((select) => {
    const context = document.createElement("canvas").getContext("2d");
    context.font = getComputedStyle(select).font;
    const widths = Array.from(select.options).map((o) => context.measureText(o.text).width);
    const widest = Math.max(...widths);
    return [select.name, Math.round(widest), select.clientWidth - 28];
  }).filter(([, text, room]) => text > room)"""


def curator():
    make_roles()
    user = User.objects.create_user("cora", password="pw")
    from django.contrib.auth.models import Group  # noqa: PLC0415 (the roles exist once made)

    user.groups.add(Group.objects.get(name="curators"))
    return user


def test_queue_form_selects_and_the_api_keys_page(console_server, browser_page):
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, console_server, off_loop(curator))
    page.goto(f"{console_server}/review/queues/new/")
    page.select_option("#id_strategy", "verifier_disagreement")
    assert page.evaluate(CUT_SELECTS) == []
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / "queue_form.png"), full_page=True)

    page.goto(f"{console_server}/account/api-keys/")
    page.fill("#id_name", "notebook <b>bold</b>")
    page.click("#api-key-submit")
    page.wait_for_selector("#new-key-value")
    key = page.inner_text("#new-key-value").strip()
    assert key.startswith("crk_")
    page.click("#copy-key")
    page.wait_for_selector("#copy-state:text('copied to the clipboard')")
    assert page.evaluate("navigator.clipboard.readText()") == key
    styled = page.evaluate(
        """() => { const table = document.getElementById("api-key-table");
          const head = table.querySelector("th"), cell = table.querySelector("td");
          const style = (node) => getComputedStyle(node);
          return [style(table).borderCollapse, style(head).backgroundColor,
                  style(cell).borderBottomStyle, style(table).backgroundColor]; }"""
    )
    assert styled == ["collapse", "rgb(238, 240, 244)", "solid", "rgb(255, 255, 255)"]
    assert "notebook <b>bold</b>" in page.inner_text("#api-key-table")
    page.screenshot(path=str(SCREENS / "api_keys.png"), full_page=True)
    assert page.errors == []
