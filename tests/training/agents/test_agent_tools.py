"""The agent's tools on real sandbox sessions: bash, the file editor, run_tests, submit; bad
calls are error observations, never exceptions; the schemas hold nothing the environment owns."""

import pytest

from sandboxes.queue import run_many
from sandboxes.sessions import open_session
from training.agents.environment import FunctionTaskEnvironment
from training.agents.parsers import HermesParser, ToolCall
from training.agents.tools import ToolLimits, truncate
from training.rollout import TaskSpec

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
TASK = TaskSpec(
    task_version_id=1,
    prompt=PROMPT,
    entry_point="add",
    visible_tests="def check(candidate):\n    assert candidate(1, 2) == 3\n",
    hidden_tests=(
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
    ),
    timeout_s=10,
    reference_solution="    return a + b\n",
)


@pytest.fixture
def env():
    environment = FunctionTaskEnvironment(
        TASK, tool_limits=ToolLimits(output_chars=600, max_timeout_s=3)
    )
    session = open_session(environment.workspace(), limits=environment.session_limits)
    environment.open(session)
    yield environment
    environment.close()


def call(env, name, **arguments):
    """One call through the environment's turn logic: its tool message and record."""
    message = HermesParser().parse("")
    message.tool_calls = [ToolCall(id="call_0", name=name, arguments=arguments)]
    step = env.step(message)
    return step.observations[0]["content"], step.records[0], step


def test_schemas_hold_only_what_the_policy_chooses(env):
    opening = env.open(env.session)
    names = [t["function"]["name"] for t in opening.tools]
    assert names == ["bash", "file_editor", "run_tests", "submit"]
    text = str(opening.tools)
    for hidden in ("session", "slot", "output_chars", "max_timeout"):
        assert hidden not in text


def test_bash_runs_in_the_workspace(env):
    output, record, _ = call(env, "bash", command="ls; echo err >&2; exit 3")
    assert "solution.py" in output and "[stderr]\nerr" in output and "[exit code 3]" in output
    assert record.error and record.seconds > 0


def test_a_command_that_never_returns_is_killed_at_the_cap(env):
    output, record, _ = call(env, "bash", command="sleep 100", timeout=100)
    assert "timed out after 3 s" in output and record.error


def test_a_flood_is_cut_to_the_budget_with_a_marker(env):
    output, _, _ = call(env, "bash", command="yes | head -c 5000000")
    assert (
        len(output) < 800 and "characters cut: the output passed the 600-character budget" in output
    )


def test_unknown_tools_and_bad_arguments_are_error_observations(env):
    output, record, _ = call(env, "rm_rf", path="/")
    assert output.startswith("error: unknown tool 'rm_rf'") and "bash, file_editor" in output
    output, _, _ = call(env, "bash")
    assert "'command' is a required property" in output
    output, _, _ = call(env, "bash", command="ls", session_id="other")
    assert "Additional properties are not allowed" in output
    output, _, _ = call(env, "file_editor", command="delete", path="x")
    assert "is not one of" in output


def test_view_edit_insert_and_undo(env):
    output, _, _ = call(env, "file_editor", command="view", path="solution.py")
    assert output.startswith("error") is False and "     1\tdef add(a, b):" in output
    output, record, step = call(
        env,
        "file_editor",
        command="str_replace",
        path="solution.py",
        old_str='"""Return a + b."""',
        new_str='"""Return a + b."""\n    return a + b',
    )
    assert "edited solution.py" in output and step.edited
    assert "+    return a + b" in record.diff
    assert env.session.read_text("solution.py").endswith("    return a + b\n")
    call(
        env,
        "file_editor",
        command="insert",
        path="solution.py",
        insert_line=0,
        new_str="import math",
    )
    assert env.session.read_text("solution.py").startswith("import math\ndef add")
    call(env, "file_editor", command="undo_edit", path="solution.py")
    call(env, "file_editor", command="undo_edit", path="solution.py")
    assert env.session.read_text("solution.py") == PROMPT
    output, _, _ = call(env, "file_editor", command="undo_edit", path="solution.py")
    assert "no edit of solution.py to undo" in output


def test_str_replace_needs_exactly_one_match(env):
    call(env, "file_editor", command="create", path="dup.py", file_text="x = 1\nx = 1\n")
    output, _, _ = call(
        env, "file_editor", command="str_replace", path="dup.py", old_str="x = 1", new_str="y"
    )
    assert "occurs 2 times (lines [1, 2])" in output
    output, _, _ = call(
        env, "file_editor", command="str_replace", path="dup.py", old_str="zzz", new_str="y"
    )
    assert "does not occur" in output
    call(env, "file_editor", command="undo_edit", path="dup.py")
    assert "no such file" in call(env, "file_editor", command="view", path="dup.py")[0]


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "missing.py"])
def test_paths_outside_or_missing_are_error_observations(env, path):
    output, record, _ = call(env, "file_editor", command="view", path=path)
    assert output.startswith("error: ") and record.error


def test_run_tests_sees_the_current_workspace_and_submit_ends(env):
    output, record, _ = call(env, "run_tests")
    assert "0/1 visible tests passed" in output and record.error
    call(
        env,
        "file_editor",
        command="create",
        path="solution.py",
        file_text=PROMPT + "    return a + b\n",
    )
    output, record, _ = call(env, "run_tests")
    assert "1/1 visible tests passed" in output and not record.error
    output, _, step = call(env, "submit")
    assert output == "Submitted." and step.done


def test_grading_restores_planted_test_configuration(env):
    call(
        env,
        "file_editor",
        command="create",
        path="solution.py",
        file_text=PROMPT + "    return 3\n",
    )
    call(
        env,
        "file_editor",
        command="create",
        path="conftest.py",
        file_text="import sys; sys.exit(0)\n",
    )
    files = env.final_files()
    assert "conftest.py" not in files
    [grade] = run_many([env.grading_request(files)])
    assert (grade.tests_passed, grade.tests_total) == (1, 2)


def test_parse_errors_and_a_turn_without_calls_get_observations(env):
    step = env.step(HermesParser().parse("<tool_call>{not json}</tool_call>"))
    assert step.observations[0]["content"].startswith("error: tool call 1: invalid JSON")
    step = env.step(HermesParser().parse("I think I am done."))
    assert "no tool call" in step.observations[0]["content"] and not step.done


def test_truncate_keeps_head_and_tail():
    text = "a" * 500 + "b" * 500
    cut = truncate(text, 300)
    assert cut.startswith("a" * 200) and cut.endswith("b" * 100) and "700 characters cut" in cut
    assert truncate("short", 300) == "short"
