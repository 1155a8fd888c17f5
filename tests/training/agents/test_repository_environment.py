"""The repository environment on a tiny repository task (tests/sandboxes/repository_fixture.py):
the workspace is a fresh single-commit git repository of the task's files, run_tests runs the
visible ids in a fresh sandbox, the final workspace is graded by every FAIL_TO_PASS and
PASS_TO_PASS id (hidden test files added), and the scripted demonstration and an agent rollout
go through the same path."""

from __future__ import annotations

import pytest
import torch

from sandboxes.repository import make_patch
from sandboxes.sessions import open_session
from tests.environments import built
from tests.sandboxes.repository_fixture import BUGGY, FAIL_TO_PASS, FIXED, TESTS
from tests.training.repository_tasks import repository_task
from training.agents.chat import chatml_text
from training.agents.demonstrations import scripted_repository_demonstration
from training.agents.environment import RepositoryEnvironment, environment_for
from training.agents.parsers import ParsedMessage, ToolCall
from training.agents.policy import build_agent_policy
from training.rollout import RolloutConfig, collect_rollouts

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def task():
    return repository_task(
        BUGGY,
        TESTS,
        task_version_id=11,
        environment=built("python3.11-pytest").request_field(),
        reference_patch=make_patch(BUGGY, FIXED),
        prompt="clamp(value, low, high) must return high when value >= high (high is inclusive).",
    )


def call(name, **arguments):
    return ParsedMessage(
        content="", tool_calls=[ToolCall(id="call_0", name=name, arguments=arguments)]
    )


def test_the_agent_fixes_the_repository_through_the_tools(task):
    env = environment_for(task)
    assert isinstance(env, RepositoryEnvironment)
    with open_session(env.workspace(), environment=task.environment) as session:
        opening = env.open(session)
        assert "high is inclusive" in opening.user
        assert [t["function"]["name"] for t in opening.tools] == [
            "bash",
            "file_editor",
            "run_tests",
            "submit",
        ]
        log = env.step(call("bash", command="git log --oneline | wc -l; ls tests"))
        assert log.observations[0]["content"].split()[:3] == ["1", "__init__.py", "test_ops.py"]
        # the visible ids only: the hidden test file is not in the workspace
        visible = env.step(call("run_tests")).observations[0]["content"]
        assert visible.startswith("3/3 tests passed"), visible
        fixed = env.step(
            call(
                "file_editor",
                command="str_replace",
                path="calc/ops.py",
                old_str="return high - 1",
                new_str="return high",
            )
        )
        assert fixed.edited and "calc/ops.py" in fixed.records[0].diff
        assert env.step(call("submit")).done
        graded = env.grade(env.final_files())
    assert graded.status == "ok" and graded.tests_total == len(TESTS.ids)
    assert graded.tests_passed == graded.tests_total


def test_an_unfixed_workspace_fails_exactly_fail_to_pass(task):
    env = environment_for(task)
    graded = env.grade(dict(BUGGY))
    assert graded.status == "failed"
    assert {t.id for t in graded.tests if not t.passed} == set(FAIL_TO_PASS)
    assert "assert 9 == 10" in next(t.error for t in graded.tests if not t.passed)


def test_the_scripted_demonstration_and_a_rollout_take_the_same_path(task):
    demonstration = scripted_repository_demonstration(RepositoryEnvironment(task))
    tool_outputs = [m["content"] for m in demonstration.messages if m["role"] == "tool"]
    assert tool_outputs[0].startswith("3/3 tests passed")
    assert "return high - 1" in tool_outputs[1]  # it viewed the lines the patch changes
    assert tool_outputs[2].startswith("edited calc/ops.py")  # one str_replace, not the whole file
    assert "return high\n" in tool_outputs[2] and "return high - 1" not in tool_outputs[2]
    assert demonstration.messages[-1]["tool_calls"][0]["function"]["name"] == "submit"

    policy = build_agent_policy(
        [chatml_text(demonstration.messages, demonstration.tools)] * 2,
        vocab_size=600,
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=2048,
        device=torch.device("cpu"),
        seed=2,
    )
    rollouts, stats = collect_rollouts(
        policy,
        [task],
        RolloutConfig(
            rollout_mode="agent", group_size=2, max_turns=2, max_new_tokens=16, timeout_s=300
        ),
        generator=torch.Generator().manual_seed(0),
    )
    assert len(rollouts) == 2 and stats.turns >= 2
    for rollout in rollouts:
        # an untrained policy changes nothing that fixes the bug: graded by every id, not
        # resolved, and paid nothing (correctness is the FAIL_TO_PASS share; none passed)
        assert rollout.status in ("failed", "ok") and rollout.tests_total == len(TESTS.ids)
        assert rollout.tests_passed < rollout.tests_total and rollout.reward == 0.0
