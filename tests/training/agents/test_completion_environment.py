"""Completion rollouts are one more environment of the one rollout loop: the policy's turn is
the program, each step runs it on the visible tests in a real sandbox, and the observation is
``[obs] + feedback + prompt`` (the loop: tests/training/test_rollout_token_in_token_out.py)."""

from dataclasses import replace

import pytest

from tests.training.rollouts import ADD_PROMPT, add_task, tiny_policy
from training.agents import trajectory as T
from training.agents.completion import (
    OBSERVATION_TEXT_TOKENS,
    CompletionEnvironment,
    CompletionTemplate,
)
from training.agents.parsers import ParsedMessage

PROMPT = ADD_PROMPT
VISIBLE = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
HIDDEN = VISIBLE + "    assert candidate(0, 0) == 0\n    assert candidate(-1, 1) == 0\n"
TASK = add_task(visible=VISIBLE, hidden=HIDDEN)


@pytest.fixture(scope="module")
def policy():
    return tiny_policy()


def test_a_right_body_ends_the_episode_and_a_wrong_one_is_shown_its_failure():
    env = CompletionEnvironment(TASK)
    env.open(None)
    wrong = env.step(ParsedMessage(content="    return a - b\n"))
    assert not wrong.done and wrong.visible.tests_passed == 0
    [record] = wrong.records
    assert record.name == T.RUN_CODE and record.error
    assert record.arguments["code"] == PROMPT + "    return a - b\n"
    assert record.result["status"] == wrong.visible.status
    assert "visible tests passed 0/1" in wrong.observations[0]["content"]
    assert wrong.observations[1] == {"role": "user", "content": PROMPT}
    right = env.step(ParsedMessage(content="    return a + b\n"))
    assert right.done and right.visible.passed
    files = env.final_files()
    assert env.graded_code(files) == PROMPT + "    return a + b\n"
    assert env.grading_request(files) == TASK.request(PROMPT + "    return a + b\n", HIDDEN)


def test_the_template_renders_prompt_feedback_and_prompt_again(policy):
    template = CompletionTemplate(policy)
    assert template.prompt_ids(
        [{"role": "system", "content": ""}, {"role": "user", "content": PROMPT}]
    ) == [
        policy.bos_id,
        *policy.encode(PROMPT),
    ]
    feedback = "x " * 200
    ids = template.observation_ids(
        [{"role": "tool", "content": feedback}, {"role": "user", "content": PROMPT}]
    )
    cut = policy.encode(feedback)[:OBSERVATION_TEXT_TOKENS]
    assert len(cut) == OBSERVATION_TEXT_TOKENS
    assert ids == [policy.obs_id, *cut, *policy.encode(PROMPT)]


def test_a_repository_task_is_refused_by_name():
    repository = replace(TASK, task_version_id=7, prompt="Fix the bug.", kind="repository")
    with pytest.raises(ValueError, match="task version 7 is a repository task.*agent"):
        CompletionEnvironment(repository)
