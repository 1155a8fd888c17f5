"""GRPO advantages, the clipped loss as GRPO uses it and the SFT loss, against values worked out by
hand."""

import math

import pytest
import torch

from training.algorithms.grpo import group_advantages
from training.algorithms.ppo import clipped_policy_loss
from training.algorithms.sft import sft_loss


def test_group_advantages_mean_std():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    adv = group_advantages(rewards, eps=0.0 + 1e-12)
    # group 1: mean 0.5, population std 0.5 -> +1, -1, -1, +1; group 2: all equal -> 0
    assert adv[0].tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0])
    assert adv[1].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_group_advantages_mean_only():
    rewards = torch.tensor([[1.0, 0.0, 0.5]])
    assert group_advantages(rewards, normalize_std=False)[0].tolist() == pytest.approx(
        [0.5, -0.5, 0.0]
    )


def test_clipped_loss_token_mean_by_hand():
    # row 0: A=+1, ratios e^0.5 (clipped to 1.2) and 1;
    # row 1: A=-1, ratio e^-0.5 (clipped to 0.8), last token masked
    logprobs = torch.tensor([[0.5, 0.0], [-0.5, 0.3]])
    old = torch.zeros(2, 2)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    # surrogates: min(1.6487*1, 1.2*1)=1.2 ; 1 ; min(0.6065*-1, 0.8*-1) = -0.8
    expected = -(1.2 + 1.0 - 0.8) / 3
    loss = clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.2, clip_high=0.2, aggregation="token-mean"
    )
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_clipped_loss_sequence_mean_by_hand():
    logprobs = torch.tensor([[0.5, 0.0], [-0.5, 0.3]])
    old = torch.zeros(2, 2)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    expected = -(((1.2 + 1.0) / 2) + (-0.8 / 1)) / 2
    loss = clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.2, clip_high=0.2, aggregation="seq-mean-token-mean"
    )
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_masked_tokens_get_no_gradient():
    logprobs = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    loss = clipped_policy_loss(
        logprobs, logprobs.detach(), torch.tensor([2.0]), torch.tensor([[1.0, 0.0, 1.0]])
    )
    loss.backward()
    # d/dlogp of -(ratio*A)/2 at ratio 1 is -A/2 = -1 on trained tokens, 0 on the masked one
    assert logprobs.grad.tolist() == [[-1.0, 0.0, -1.0]]


def test_empty_mask_is_an_error():
    with pytest.raises(ValueError, match="selects no token"):
        clipped_policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1), torch.zeros(1, 2))


def test_sft_loss_is_mean_nll_of_masked_tokens():
    logprobs = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.1)]])
    mask = torch.tensor([[0.0, 1.0, 1.0]])
    assert sft_loss(logprobs, mask).item() == pytest.approx((math.log(4) + math.log(10)) / 2)
