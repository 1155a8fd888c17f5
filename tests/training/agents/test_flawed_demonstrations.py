"""Flawed demonstrations: the expert's steps with the reference one mutation away, kept only
where the visible tests (run in a real sandbox) catch it; the run config refuses them where
they cannot apply."""

import pytest

from training.agents.demonstrations import flawed_function_demonstrations, mutated_bodies
from training.agents.environment import FunctionTaskEnvironment
from training.config import ConfigError, RunConfig

from .test_agent_tools import TASK


def test_mutated_bodies_change_one_line_in_the_references_formatting():
    reference = "    if n == 0:\n        return 0\n    return n*fib(n - 1)\n"
    prompt = "def fib(n):\n    '''n!'''\n"
    bodies = mutated_bodies(prompt, reference)
    assert bodies and len(set(bodies)) == len(bodies) and reference not in bodies
    for body in bodies:
        changed = [
            (a, b) for a, b in zip(reference.split("\n"), body.split("\n"), strict=True) if a != b
        ]
        assert len(changed) == 1, body
        old, new = changed[0]
        assert new.startswith(old[: len(old) - len(old.lstrip())])  # indentation kept
        compile(prompt + body, "<mutant>", "exec")
    assert "    if n != 0:\n        return 0\n    return n*fib(n - 1)\n" in bodies
    assert mutated_bodies("def f(:\n", "    return 1\n") == []


def test_a_flawed_demonstration_fails_its_visible_tests_and_submits():
    [demonstration] = flawed_function_demonstrations(lambda: FunctionTaskEnvironment(TASK), count=1)
    calls = [
        m["tool_calls"][0]["function"] for m in demonstration.messages if m["role"] == "assistant"
    ]
    assert [c["name"] for c in calls] == ["file_editor", "file_editor", "run_tests", "submit"]
    body = calls[1]["arguments"]["new_str"]
    assert body != TASK.reference_solution.rstrip("\n")
    assert body in {b.rstrip("\n") for b in mutated_bodies(TASK.prompt, TASK.reference_solution)}
    tests = [m["content"] for m in demonstration.messages if m["role"] == "tool"][2]
    assert tests.startswith("error: failed: 0/1 visible tests passed"), tests


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"flawed_demonstrations": 1}, "is for rollout_mode 'agent'"),
        ({"flawed_demonstrations": -1, "rollout_mode": "agent"}, "must be 0 or more"),
    ],
)
def test_the_config_refuses_flawed_demonstrations_where_they_do_not_apply(config, error):
    with pytest.raises(ConfigError, match=error):
        RunConfig.from_dict(config)


def test_flawed_demonstrations_and_sft_data_are_refused_together(tmp_path, settings):
    settings.SFT_DATA_DIR = tmp_path  # sft_data names a file in that directory
    data = tmp_path / "demos.jsonl"
    data.write_text("{}\n")
    with pytest.raises(ConfigError, match="'flawed_demonstrations' mutates"):
        RunConfig.from_dict(
            {"rollout_mode": "agent", "flawed_demonstrations": 1, "sft_data": str(data)}
        )
