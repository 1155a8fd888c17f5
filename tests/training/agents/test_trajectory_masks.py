"""Trajectory assembly: masks on sampled ids only, the context-length guard, and a tokenizer
whose pad equals its end-of-sequence token."""

import pytest
import torch

from training.agents.policy import load_agent_policy
from training.agents.trajectory import TRUNCATED, AgentTrajectory, AgentTurn
from training.algorithms.logprobs import pad_batch

from .checkpoints import qwen2_checkpoint


def turn(ids, index=0):
    return AgentTurn(
        index=index,
        sampled_ids=list(ids),
        logprobs=[-0.5] * len(ids),
        text="",
        stopped=True,
        message={"role": "assistant", "content": ""},
    )


def test_masks_are_one_exactly_on_sampled_ids():
    t = AgentTrajectory.start([1, 2, 3], [{"role": "user", "content": "u"}], limit=100)
    t.add_turn(turn([7, 8, 9]))
    assert t.add_observation([{"role": "tool", "content": "x"}], [4, 5], reserve=10)
    t.add_turn(turn([7, 9], index=1))
    ids, mask = t.sequence_and_mask()
    assert ids == [1, 2, 3, 7, 8, 9, 4, 5, 7, 9]
    assert mask == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]
    assert len(t.logprobs) == len(ids)
    assert [m["role"] for m in t.messages] == ["user", "assistant", "tool", "assistant"]


def test_an_observation_that_would_overflow_is_dropped_and_the_trajectory_truncated():
    t = AgentTrajectory.start([1] * 10, [], limit=30)
    t.add_turn(turn([2] * 10))
    before = t.sequence_and_mask()
    assert not t.add_observation([{"role": "tool", "content": "big"}], [3] * 6, reserve=5)
    assert t.end_reason == TRUNCATED
    assert t.sequence_and_mask() == before
    assert t.turns[-1].observation_ids == [] and t.messages[-1]["role"] == "assistant"
    assert len(t.ids) == len(t.mask) == len(t.logprobs)


def test_a_prompt_longer_than_the_limit_is_refused():
    with pytest.raises(ValueError, match="raise the token budget"):
        AgentTrajectory.start([1] * 50, [], limit=50)


def test_pad_equal_to_eos_keeps_the_sampled_end_token_trained(tmp_path):
    policy = load_agent_policy(qwen2_checkpoint(tmp_path, pad_is_eos=True), device="cpu")
    chat = policy.chat
    assert chat.pad_id == chat.end_of_turn_id
    prompt = chat.prompt_ids([{"role": "user", "content": "hi"}])
    long = AgentTrajectory.start(prompt, [], limit=200)
    long.add_turn(turn(chat.encode("ok ok ok") + [chat.end_of_turn_id]))
    short = AgentTrajectory.start(prompt, [], limit=200)
    short.add_turn(turn(chat.encode("ok") + [chat.end_of_turn_id]))
    rows = [t.sequence_and_mask() for t in (long, short)]
    ids, attention, loss_mask = pad_batch(
        [r[0] for r in rows], [r[1] for r in rows], policy.pad_id, torch.device("cpu")
    )
    end = len(rows[1][0]) - 1
    # The short row's sampled end token has the pad's id and is trained; its padding is not.
    assert ids[1, end] == chat.pad_id and loss_mask[1, end] == 1 and attention[1, end] == 1
    assert (ids[1, end + 1 :] == chat.pad_id).all()
    assert loss_mask[1, end + 1 :].sum() == 0 and attention[1, end + 1 :].sum() == 0
    assert loss_mask.sum() == sum(sum(r[1]) for r in rows)
