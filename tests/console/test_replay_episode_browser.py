"""In a real browser, an agent's repository trajectory replays as a whole episode: its opening (the
system prompt, the problem statement and the tools' schemas, as the environment renders them for
the task), each edit read as an edit (a str_replace as the diff of its old and new text, an
insert as added lines, a bash call as its command; not escaped JSON), a turn whose tool call
failed red in the turn index as in its header, then the final grading per FAIL_TO_PASS and
PASS_TO_PASS id. A hunk of the workspace diff opens its file in the task's workspace browser at
its lines, and that browser moves between files without a reload. Model-written text stays text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.task_spec import task_spec_of
from tests.browser import browser_marks, off_loop, sign_in
from tests.review.review_seed import make_roles, make_user
from tests.tasks_library.repository_helpers import FAIL_TO_PASS, PASS_TO_PASS, record
from training import services
from training.agents.environment import RepositoryEnvironment
from training.config import RunConfig
from training.models import EpisodeOpening, Trajectory, Turn

SCREENS = Path(__file__).resolve().parents[2] / "test-artifacts"
pytestmark = browser_marks()
HOSTILE = "<img src=x onerror=\"document.title='owned'\">"
STATEMENT = f"clamp(50, 0, 10) returns 50; it should never exceed its upper bound. {HOSTILE}"
OLD, NEW = "    return max(low, x)", "    return max(low, min(x, high))"
DIFF = (
    "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -5,2 +5,2 @@\n def clamp(x, low, high):\n"
    f"-{OLD}\n+{NEW}\n"
)


def call(name: str, arguments: dict, output: str, *, error: bool = False, diff: str = "") -> dict:
    return {"call_id": f"call_{name}", "name": name, "arguments": arguments, "output": output,
            "error": error, "seconds": 0.04, "diff": diff}  # fmt: skip


def turn(trajectory, index: int, calls: list[dict], *, code: str = "") -> Turn:
    return Turn(
        trajectory=trajectory,
        index=index,
        action="tool_calls",
        policy_text=f"<tool_call>{json.dumps({'name': calls[0]['name']})}</tool_call>",
        token_ids=list(range(20)),
        logprobs=[-0.5] * 20,
        code=code,
        observation=calls[0]["output"],
        observation_token_ids=list(range(8)),
        sandbox_status="error" if any(c["error"] for c in calls) else "ok",
        sandbox_result={"tool_calls": calls, "parse_errors": [], "stopped": True},
    )


def seed():
    repository_tasks_import([record(problem_statement=STATEMENT)], task_set_name="episode")
    TaskVersion.objects.update(verdict=TaskVersion.VERDICT_VALID)
    task_set = task_set_get(name="episode")
    (version,) = task_set_versions(task_set=task_set)
    run = services.run_create(
        task_set=task_set, config=RunConfig.from_dict({"steps": 2, "rollout_mode": "agent"})
    )
    opening = RepositoryEnvironment(task_spec_of(version)).opening()  # what the rollout sends
    content = {"system": opening.system, "user": opening.user, "tools": opening.tools}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    stored = EpisodeOpening.objects.create(digest=digest, **content)
    errors = {FAIL_TO_PASS[0]: f"assert 50 == 10 {HOSTILE}"}
    trajectory = Trajectory.objects.create(
        run=run, step=1, group=0, index_in_group=0, task_version=version, status="failed",
        reward=0.75, reward_components={"correctness": 0.75}, tests_passed=3, tests_total=4,
        opening=stored,
        grading={"status": "failed", "tests": [
            {"id": test_id, "passed": test_id not in errors, "error": errors.get(test_id, "")}
            for test_id in FAIL_TO_PASS + PASS_TO_PASS
        ]},
    )  # fmt: skip
    Turn.objects.bulk_create(
        [
            turn(
                trajectory,
                0,
                [
                    call(
                        "bash",
                        {"command": "grep -n clamp calc/ops.py"},
                        "5:def clamp(x, low, high):",
                    )
                ],
            ),  # fmt: skip
            turn(
                trajectory,
                1,
                [
                    call(
                        "file_editor",
                        {"command": "view", "path": "calc/ops.py", "view_range": [4, 6]},
                        f"     5\tdef clamp(x, low, high):\n     6\t{OLD}",
                    )
                ],
            ),  # fmt: skip
            turn(
                trajectory,
                2,
                [
                    call(
                        "file_editor",
                        {
                            "command": "str_replace",
                            "path": "calc/ops.py",
                            "old_str": OLD,
                            "new_str": NEW,
                        },
                        "edited calc/ops.py",
                        diff=DIFF,
                    )
                ],
                code=DIFF,
            ),  # fmt: skip
            turn(trajectory, 3, [call("run_tests", {}, f"3/4 tests passed {HOSTILE}", error=True)]),
            turn(trajectory, 4, [call("submit", {}, "submitted")]),
        ]
    )
    return run, trajectory, version


def viewer():
    make_roles()
    return make_user("vic", "viewer")


def test_the_whole_episode_replays_and_a_hunk_opens_its_file(console_server, browser_page):
    run, trajectory, version = off_loop(seed)
    page = browser_page
    sign_in(page, console_server, off_loop(viewer))  # the task library needs a sign-in
    page.goto(f"{console_server}/runs/{run.pk}/trajectories/{trajectory.pk}/")
    page.wait_for_selector("#turn-5[data-rendered]", timeout=10000)

    opening = page.locator("#episode-opening")
    assert "You are a coding agent" in opening.locator("#opening-system").inner_text()
    assert STATEMENT in opening.locator("#opening-user").inner_text()  # the statement, as text
    tools = opening.locator("#opening-tools li")
    assert sorted(tools.evaluate_all("items => items.map(i => i.dataset.tool)")) == [
        "bash", "file_editor", "run_tests", "submit"
    ]  # fmt: skip
    editor = opening.locator("#opening-tools li[data-tool='file_editor']").inner_text()
    assert "command" in editor and "str_replace" in editor and "old_str" in editor

    assert page.locator("#turn-1 .tool-command").inner_text() == "$ grep -n clamp calc/ops.py"
    assert "calc/ops.py view lines 4–6" in page.locator("#turn-2 .edit-path").inner_text()
    edit = page.locator("#turn-3 .edit")
    assert edit.locator(".d-del").inner_text().strip() == f"-{OLD}"
    assert edit.locator(".d-add").inner_text().strip() == f"+{NEW}"
    assert not page.locator("#turn-3 details.tool-json").evaluate("d => d.open")  # JSON folded
    assert page.locator("#turn-4 h2 .sb").inner_text() == "error"
    cell = page.locator("#turn-index .cell[data-pos='3']")
    assert "sb-error" in cell.get_attribute("class")
    assert cell.evaluate("c => getComputedStyle(c).backgroundColor") == "rgb(248, 208, 200)"

    grading = page.locator("#grading-table tbody tr")
    assert grading.count() == len(FAIL_TO_PASS) + len(PASS_TO_PASS)
    first = grading.first
    assert first.get_attribute("data-list") == "FAIL_TO_PASS" and "failed" in first.inner_text()
    assert f"assert 50 == 10 {HOSTILE}" in first.inner_text()
    assert page.locator("#grading-table tr[data-list='PASS_TO_PASS'] .badge.ok").count() == 3
    assert (
        page.evaluate("document.querySelectorAll('#turns img, #episode-opening img').length") == 0
    )
    assert page.title() != "owned"
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.locator("#turn-3").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENS / "replay_episode_turns.png"))
    page.locator("#episode-opening").screenshot(path=str(SCREENS / "replay_episode_opening.png"))
    page.locator("#episode-grading").screenshot(path=str(SCREENS / "replay_episode_grading.png"))

    # the hunk of the workspace diff: the task's file at the hunk's lines, numbered, highlighted
    page.locator("#turn-3 .tool-diff summary").click()
    hunk = page.locator("#turn-3 .tool-diff a.hunk-link")
    assert hunk.inner_text().strip() == "@@ -5,2 +5,2 @@"
    hunk.click()
    page.wait_for_selector("#file-view[data-path='calc/ops.py'] #L5.target", timeout=10000)
    assert page.locator("#L5").inner_text() == "def clamp(x, low, high):"
    assert page.locator("#L5 .k").first.inner_text() == "def"  # highlighted
    page.screenshot(path=str(SCREENS / "workspace_from_hunk.png"))

    # the workspace browser: a crumb, a directory, a file, the patch's hunk: no reload between
    page.evaluate("window.stillTheSamePage = true")
    page.click("#crumbs a[data-path='']")
    page.wait_for_selector("#file-tree >> text=tests/")
    page.click("#file-tree >> text=tests/")
    page.click("#file-tree >> text=test_ops.py")
    page.wait_for_selector("#file-view[data-path='tests/test_ops.py']")
    assert "def test_clamp_above():" in page.inner_text("#file-view")
    page.click("#reference-patch a.hunk-link")
    page.wait_for_selector("#file-view[data-path='calc/ops.py'] .line.target", timeout=10000)
    marked = page.locator("#file-view .line.target").all_inner_texts()
    assert any("return max(low, x)" in line for line in marked)
    page.go_back()
    page.wait_for_selector("#file-view[data-path='tests/test_ops.py']")
    assert page.evaluate("window.stillTheSamePage === true")  # no reload, back included
    page.click("#file-view a.ln[data-n='8']")
    assert page.url.endswith("#L8") and "target" in page.locator("#L8").get_attribute("class")
    page.screenshot(path=str(SCREENS / "workspace_browser.png"))
    assert page.errors == []
