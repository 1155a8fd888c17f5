"""Multi-turn agent rollouts end to end: a real policy, real sessions, real grading. Scripted
demonstrations are recorded through the environment, rendered with the rollouts' masks, and a
policy warm-started on one solves its task through the tools."""

import json

import pytest
import torch

from core.errors import InputError
from training.agents import trajectory as T
from training.agents.chat import chatml_text
from training.agents.demonstrations import (
    load_demonstrations,
    render,
    scripted_function_demonstration,
    write_demonstrations,
)
from training.agents.environment import FunctionTaskEnvironment
from training.agents.policy import build_agent_policy
from training.algorithms.sft import sft_train
from training.rollout import RolloutConfig, collect_rollouts

from .test_agent_tools import TASK


@pytest.fixture(scope="module")
def demonstration():
    return scripted_function_demonstration(FunctionTaskEnvironment(TASK))


@pytest.fixture(scope="module")
def policy(demonstration):
    text = chatml_text(demonstration.messages, demonstration.tools)
    return build_agent_policy(
        [text] * 4,
        vocab_size=800,
        n_embd=64,
        n_layer=2,
        n_head=2,
        n_positions=2048,
        device=torch.device("cpu"),
        seed=1,
    )


def test_the_demonstration_holds_the_tools_real_answers(demonstration):
    roles = [m["role"] for m in demonstration.messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    outputs = [m["content"] for m in demonstration.messages if m["role"] == "tool"]
    assert "     1\tdef add(a, b):" in outputs[0]
    assert outputs[1] == "inserted 1 line(s) after line 2 of solution.py"
    assert "1/1 visible tests passed" in outputs[2]
    assert demonstration.messages[-1]["tool_calls"][0]["function"]["name"] == "submit"


def test_a_rendered_demonstration_trains_exactly_the_assistant_turns(policy, demonstration):
    chat = policy.chat
    ids, mask = render(chat, demonstration)
    assistants = [m for m in demonstration.messages if m["role"] == "assistant"]
    assert sum(mask) == sum(len(chat.assistant_ids(m)) for m in assistants)
    # Rendered by the template itself, the turns concatenate to the full template.
    full = chat.encode(chat.render(demonstration.messages, tools=demonstration.tools))
    assert ids == full[: len(ids)] and full[len(ids) :] == chat.encode("\n")
    trained = [i for i, m in zip(ids, mask) if m]
    assert trained.count(chat.end_of_turn_id) == len(assistants)


def test_demonstrations_round_trip_through_jsonl(tmp_path, demonstration, policy):
    path = tmp_path / "demos.jsonl"
    write_demonstrations(path, [demonstration])
    row = json.loads(path.read_text())
    assert isinstance(row["messages"][2]["tool_calls"][0]["function"]["arguments"], str)
    [loaded] = load_demonstrations(path)
    assert render(policy.chat, loaded) == render(policy.chat, demonstration)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("not json", "not JSON"),
        ('{"messages": [{"role": "wizard", "content": "x"}]}', "needs a role"),
        ('{"messages": [{"role": "user", "content": "x"}]}', "no assistant message"),
        (
            '{"messages": [{"role": "assistant", "content": "", "tool_calls": '
            '[{"function": {"name": "bash", "arguments": "{oops"}}]}]}',
            r"tool_calls\[0\]",
        ),
    ],
)
def test_bad_demonstration_lines_name_the_line_and_the_field(tmp_path, line, error):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n" + line + "\n")
    with pytest.raises(InputError, match=error) as caught:
        load_demonstrations(path)
    assert ":2" in str(caught.value)


def check_alignment(rollout):
    t = rollout.trajectory
    assert len(t.ids) == len(t.mask) == len(t.logprobs) <= t.limit
    sampled = [i for i, m in zip(t.ids, t.mask) if m]
    assert sampled == [i for turn in t.turns for i in turn.sampled_ids]
    observed = t.ids[t.prompt_length :]
    rebuilt = [i for turn in t.turns for i in turn.sampled_ids + turn.observation_ids]
    assert observed == rebuilt


def test_an_untrained_policy_takes_turns_and_is_graded(policy):
    config = RolloutConfig(rollout_mode="agent", group_size=3, max_turns=3, max_new_tokens=24)
    rollouts, stats = collect_rollouts(
        policy, [TASK], config, generator=torch.Generator().manual_seed(0)
    )
    assert len(rollouts) == 3
    for rollout in rollouts:
        check_alignment(rollout)
        assert rollout.trajectory.end_reason in (T.MAX_TURNS, T.TRUNCATED, T.SUBMITTED)
        assert rollout.tests_total == 2 and rollout.status
        assert rollout.final_code.startswith("def add(a, b):")
    assert stats.turns == sum(len(r.turns) for r in rollouts)
    metrics = stats.metrics(rollouts)
    assert metrics["agent/turns_mean"] > 0 and metrics["timing/generation_s"] > 0
    assert 0.0 <= metrics["agent/tool_hidden_share"] <= 1.0


def test_a_trajectory_past_its_token_budget_ends_truncated(policy):
    opening = FunctionTaskEnvironment(TASK).opening()
    prompt = policy.chat.prompt_ids(opening.messages(), tools=opening.tools)
    config = RolloutConfig(
        rollout_mode="agent",
        group_size=2,
        max_turns=5,
        max_new_tokens=24,
        max_tokens=len(prompt) + 40,
    )
    rollouts, stats = collect_rollouts(
        policy, [TASK], config, generator=torch.Generator().manual_seed(2)
    )
    for rollout in rollouts:
        check_alignment(rollout)
        assert rollout.trajectory.end_reason == T.TRUNCATED
        assert len(rollout.turns) == 1 and rollout.turns[0].observation_ids == []
        assert rollout.tests_total == 2  # graded all the same
    assert stats.metrics(rollouts)["agent/truncated"] == 2


def test_a_policy_warm_started_on_the_demonstration_solves_the_task(demonstration):
    text = chatml_text(demonstration.messages, demonstration.tools)
    policy = build_agent_policy(
        [text] * 4,
        vocab_size=800,
        n_embd=64,
        n_layer=2,
        n_head=2,
        n_positions=2048,
        device=torch.device("cpu"),
        seed=1,
    )
    example = render(policy.chat, demonstration)
    summary = sft_train(policy, [example], epochs=150, batch_size=1, lr=3e-3, grad_clip=1.0, seed=0)
    assert summary["sft/loss_last"] < 0.05 < summary["sft/loss_first"]
    config = RolloutConfig(
        rollout_mode="agent",
        group_size=2,
        max_turns=6,
        max_new_tokens=160,
        temperature=0.1,
        timeout_s=3600,
    )
    rollouts, stats = collect_rollouts(
        policy, [TASK], config, generator=torch.Generator().manual_seed(0)
    )
    for rollout in rollouts:
        check_alignment(rollout)
        assert rollout.trajectory.end_reason == T.SUBMITTED, rollout.trajectory.messages
        assert [len(t.tools) for t in rollout.turns] == [1, 1, 1, 1]
        assert rollout.passed and rollout.reward == 1.0
        assert "+    return a + b" in rollout.final_diff
    assert stats.tool_calls == {"file_editor": 4, "run_tests": 2, "submit": 2}
