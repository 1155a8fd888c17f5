"""In a real browser: an agent's trajectory replays each turn's tool calls (arguments, output,
the workspace diff after an edit), model-written text stays text, and a 200-turn trajectory is a
key press from its last turn."""

from pathlib import Path

from tests.browser import browser_marks, off_loop
from tests.console.replay_seed import seeded_run
from training.models import Trajectory, Turn

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = browser_marks()

DIFF = (
    "--- a/solution.py\n+++ b/solution.py\n@@ -1,3 +1,4 @@\n def add(a, b):\n"
    '     """Return a + b."""\n+    return a + b\n'
)
HOSTILE = "<script>window.hacked = 1</script><img src=x onerror='window.hacked = 2'>"


def agent_turn(trajectory, i: int) -> Turn:
    edit = i % 4 == 1
    calls = [
        {
            "call_id": "call_0",
            "name": "file_editor" if edit else "bash",
            "arguments": (
                {
                    "command": "insert",
                    "path": "solution.py",
                    "insert_line": 2,
                    "new_str": "    return a + b",
                }
                if edit
                else {"command": f"python -c 'print({i})' && echo '{HOSTILE}'"}
            ),
            "output": "inserted 1 line(s) after line 2 of solution.py"
            if edit
            else f"{i}\n{HOSTILE}",
            "error": False,
            "seconds": 0.05,
            "diff": DIFF if edit else "",
        }
    ]
    return Turn(
        trajectory=trajectory,
        index=i,
        action="tool_calls",
        policy_text=f'<tool_call>\n{{"name": "{calls[0]["name"]}"}}\n</tool_call>',
        token_ids=list(range(30)),
        logprobs=[-0.5] * 30,
        code=DIFF if edit else "",
        observation=calls[0]["output"],
        observation_token_ids=list(range(10)),
        sandbox_status="ok",
        sandbox_result={
            "message": {"role": "assistant"},
            "tool_calls": calls,
            "parse_errors": [],
            "stopped": True,
        },
    )


def seed_agent(run, version, turns: int) -> Trajectory:
    trajectory = Trajectory.objects.create(
        run=run,
        step=1,
        group=0,
        index_in_group=0,
        task_version=version,
        status="ok",
        reward=1.0,
        reward_components={"correctness": 1.0},
        tests_passed=3,
        tests_total=3,
        prompt_token_ids=[1, 2, 3],
        final_code="def add(a, b):\n    return a + b\n",
    )
    Turn.objects.bulk_create(agent_turn(trajectory, i) for i in range(turns))
    return trajectory


def test_an_agent_trajectory_replays_its_tool_calls(console_server, browser_page, humaneval):
    run, versions = off_loop(seeded_run, humaneval, name="agent-replay")
    trajectory = off_loop(seed_agent, run, versions[0], 200)
    page = browser_page
    page.goto(f"{console_server}/runs/{run.pk}/trajectories/{trajectory.pk}/")
    page.wait_for_selector("#turn-2[data-rendered]", timeout=10000)
    first, second = page.locator("#turn-1"), page.locator("#turn-2")
    assert first.locator(".tool-call").count() == 1
    assert HOSTILE in first.locator(".tool-output").inner_text()
    assert "inserted after line 2" in second.locator(".edit").inner_text()  # read as an edit
    assert "insert_line" in second.locator(".tool-args").text_content()  # the JSON, folded
    # the workspace diff after the turn, beside the policy's text
    assert second.locator(".turn-grid > .col:first-child pre.diff .d-add").count() == 1
    assert page.evaluate("window.hacked") is None
    ARTIFACTS.mkdir(exist_ok=True)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.screenshot(path=str(ARTIFACTS / "agent_replay.png"))
    page.keyboard.press("G")
    page.wait_for_selector("#turn-200.selected[data-rendered]", timeout=10000)
    page.screenshot(path=str(ARTIFACTS / "agent_replay_last_turn.png"))
    assert page.errors == []
