"""RLOO leave-one-out advantages against values worked out by hand."""

import pytest
import torch

from training.algorithms.rloo import rloo_advantages


def test_leave_one_out_by_hand():
    adv = rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
    # A_0 = 1 - mean(0, 0, 1) = 1 - 1/3 = 2/3 ; A_1 = 0 - mean(1, 0, 1) = -2/3 ; A_2 likewise ;
    # A_3 like A_0
    assert adv[0].tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])


def test_several_groups_are_independent():
    adv = rloo_advantages(torch.tensor([[3.0, 1.0, 2.0], [0.5, 0.5, 0.5], [0.0, 1.0, 0.0]]))
    # group 0: 3 - (1+2)/2 = 1.5 ; 1 - (3+2)/2 = -1.5 ; 2 - (3+1)/2 = 0
    #          (= K/(K-1) * (r - mean) = 3/2 * (1, -1, 0))
    # group 1: all equal -> 0
    # group 2: 0 - (1+0)/2 = -0.5 ; 1 - 0 = 1 ; -0.5
    assert adv.flatten().tolist() == pytest.approx([1.5, -1.5, 0.0, 0.0, 0.0, 0.0, -0.5, 1.0, -0.5])
    assert adv.shape == (3, 3)


def test_two_trajectories():
    # K = 2: each baseline is the other reward: 1 - 0 = 1 ; 0 - 1 = -1
    assert rloo_advantages(torch.tensor([[1.0, 0.0]])).tolist() == [[1.0, -1.0]]


def test_advantages_of_a_group_sum_to_zero():
    adv = rloo_advantages(torch.tensor([[0.2, 0.9, 0.4, 0.0, 1.0]]))
    # sum_i (r_i - (S - r_i)/(K-1)) = S - (K*S - S)/(K-1) = S - S = 0
    assert adv.sum().item() == pytest.approx(0.0, abs=1e-6)


def test_integer_rewards_give_float_advantages():
    adv = rloo_advantages(torch.tensor([[1, 0, 0]]))
    # 1 - 0 = 1 ; 0 - (1+0)/2 = -0.5 ; -0.5
    assert adv.is_floating_point()
    assert adv[0].tolist() == pytest.approx([1.0, -0.5, -0.5])


def test_a_group_of_one_is_an_error():
    with pytest.raises(ValueError, match=r">= 2 trajectories"):
        rloo_advantages(torch.tensor([[1.0], [0.0]]))


def test_rewards_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"\[G, K\]"):
        rloo_advantages(torch.tensor([1.0, 0.0, 1.0]))
