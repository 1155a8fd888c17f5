"""PPO's clipped surrogate with DAPO's decoupled clip, and the loss aggregations, by hand."""

import pytest
import torch

from training.algorithms.aggregate import AGGREGATIONS, masked_aggregate
from training.algorithms.ppo import clip_fraction, clipped_policy_loss

# Shared example: clip_low 0.2, clip_high 0.28 -> ratio range [0.8, 1.28];
# old logprobs 0 so ratio = e^logprob.
LOGPROBS = [[0.5, 0.1], [-0.5, -0.1]]
ADVANTAGES = [1.0, -1.0]
# (0,0) e^0.5  = 1.6487 > 1.28, A=+1 -> min(1.6487, 1.28)          =  1.28      (clipped)
# (0,1) e^0.1  = 1.1052 in range, A=+1                              =  1.105171
# (1,0) e^-0.5 = 0.6065 < 0.8,  A=-1 -> min(-0.6065, 0.8*-1)        = -0.8      (clipped)
# (1,1) e^-0.1 = 0.9048 in range, A=-1                              = -0.904837


def _example(requires_grad=False):
    logprobs = torch.tensor(LOGPROBS, requires_grad=requires_grad)
    return logprobs, torch.zeros(2, 2), torch.tensor(ADVANTAGES)


def test_token_mean_with_decoupled_clip_by_hand():
    logprobs, old, adv = _example()
    loss = clipped_policy_loss(logprobs, old, adv, torch.ones(2, 2), clip_low=0.2, clip_high=0.28)
    # -(1.28 + 1.105171 - 0.8 - 0.904837) / 4 = -0.680334 / 4
    assert loss.item() == pytest.approx(-0.170083, abs=1e-6)


def test_clip_high_lets_a_positive_advantage_ratio_grow_further():
    logprobs, old, adv = torch.tensor([[0.22]]), torch.zeros(1, 1), torch.tensor([1.0])
    mask = torch.ones(1, 1)
    # e^0.22 = 1.246077: above 1.2 -> clipped to 1.2; below 1.28 -> kept
    assert clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.2, clip_high=0.2
    ).item() == pytest.approx(-1.2)
    assert clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28
    ).item() == pytest.approx(-1.246077, abs=1e-6)


def test_clip_low_bounds_a_negative_advantage_ratio_from_below():
    logprobs, old, adv = torch.tensor([[-0.3]]), torch.zeros(1, 1), torch.tensor([-1.0])
    mask = torch.ones(1, 1)
    # e^-0.3 = 0.740818: clip_low 0.2 -> min(-0.740818, 0.8*-1) = -0.8, loss +0.8
    assert clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28
    ).item() == pytest.approx(0.8)
    # clip_low 0.3 -> range [0.7, 1.28] holds 0.740818: loss +0.740818
    assert clipped_policy_loss(
        logprobs, old, adv, mask, clip_low=0.3, clip_high=0.28
    ).item() == pytest.approx(0.740818, abs=1e-6)


def test_clipped_tokens_get_zero_gradient_and_the_others_ratio_times_advantage():
    logprobs, old, adv = _example(requires_grad=True)
    old.requires_grad_(True)
    loss = clipped_policy_loss(logprobs, old, adv, torch.ones(2, 2), clip_low=0.2, clip_high=0.28)
    loss.backward()
    # d(-ratio*A/4)/dlogp = -ratio*A/4 where unclipped; clipped term is constant -> 0
    # (0,1): -1.105171*1/4 = -0.276293 ; (1,1): -0.904837*-1/4 = +0.226209
    assert logprobs.grad.flatten().tolist() == pytest.approx(
        [0.0, -0.276293, 0.0, 0.226209], abs=1e-6
    )
    assert old.grad is None  # old logprobs are constants


def test_ratio_past_the_bound_on_the_wrong_side_is_not_clipped():
    # per-token advantages [B, T]:
    #   token 0 A=+1, ratio e^-0.5 = 0.606531 < 0.8 -> min(0.606531, 0.8) = 0.606531
    #   token 1 A=-1, ratio e^0.5 = 1.648721 > 1.2 -> min(-1.648721, -1.2) = -1.648721
    logprobs = torch.tensor([[-0.5, 0.5]], requires_grad=True)
    adv = torch.tensor([[1.0, -1.0]])
    loss = clipped_policy_loss(
        logprobs, torch.zeros(1, 2), adv, torch.ones(1, 2), clip_low=0.2, clip_high=0.2
    )
    # -(0.606531 - 1.648721) / 2 = 0.521095
    assert loss.item() == pytest.approx(0.521095, abs=1e-6)
    loss.backward()
    # both unclipped: -ratio*A/2 -> -0.606531/2 = -0.303265 ; 1.648721/2 = 0.824361
    assert logprobs.grad[0].tolist() == pytest.approx([-0.303265, 0.824361], abs=1e-6)


def test_per_token_advantages_by_hand_and_per_trajectory_broadcast():
    logprobs = torch.zeros(2, 2)  # ratio 1 everywhere: surrogate = A
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    per_token = torch.tensor([[1.0, 3.0], [-2.0, 0.5]])
    # -(1 + 3 - 2) / 3 tokens; the masked 0.5 does not count
    assert clipped_policy_loss(logprobs, logprobs, per_token, mask).item() == pytest.approx(-2 / 3)
    # [B] = [2, -1] broadcast over tokens: -(2 + 2 - 1) / 3 = -1
    assert clipped_policy_loss(
        logprobs, logprobs, torch.tensor([2.0, -1.0]), mask
    ).item() == pytest.approx(-1.0)


def test_sequence_aggregations_by_hand():
    logprobs, old, adv = _example()
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    kwargs = dict(clip_low=0.2, clip_high=0.28)
    # seq-mean-token-mean: row 0 (1.28 + 1.105171) / 2 = 1.192585 ; row 1 -0.8 / 1 ;
    # (1.192585 - 0.8) / 2 = 0.196293
    loss = clipped_policy_loss(
        logprobs, old, adv, mask, aggregation="seq-mean-token-mean", **kwargs
    )
    assert loss.item() == pytest.approx(-0.196293, abs=1e-6)
    # seq-mean-token-sum-norm: (1.28 + 1.105171 - 0.8) / (2 rows * T=2) = 1.585171 / 4 = 0.396293
    loss = clipped_policy_loss(
        logprobs, old, adv, mask, aggregation="seq-mean-token-sum-norm", **kwargs
    )
    assert loss.item() == pytest.approx(-0.396293, abs=1e-6)
    # with max_tokens=10 instead of T: 1.585171 / (2 * 10) = 0.079259
    loss = clipped_policy_loss(
        logprobs, old, adv, mask, aggregation="seq-mean-token-sum-norm", max_tokens=10, **kwargs
    )
    assert loss.item() == pytest.approx(-0.079259, abs=1e-6)


# Global-count example, ratio 1 so values = advantage * mask. T = 3.
#   row 0: 3 tokens of  1.0 -> sum  3, mean  1
#   row 1: 1 token  of -2.0 -> sum -2, mean -2
#   row 2: 2 tokens of  3.0 -> sum  6, mean  3
#   row 3: no token (all masked)
# 6 tokens and 3 rows with tokens in all; halves are rows 0-1 and rows 2-3.
GLOBAL_ADV = [1.0, -2.0, 3.0, 0.5]
GLOBAL_MASK = [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def _global_batch():
    return torch.zeros(4, 3), torch.tensor(GLOBAL_ADV), torch.tensor(GLOBAL_MASK)


@pytest.mark.parametrize(
    "aggregation, counts, expected",
    [
        ("token-mean", {"token_count": 6}, -7 / 6),  # (3 - 2 + 6) / 6 tokens
        ("seq-mean-token-mean", {"row_count": 3}, -2 / 3),  # (1 - 2 + 3) / 3 rows
        ("seq-mean-token-sum-norm", {"row_count": 3}, -7 / 9),  # (3 - 2 + 6) / (3 rows * T=3)
    ],
)
def test_halves_with_global_counts_add_up_to_the_full_batch(aggregation, counts, expected):
    logprobs, adv, mask = _global_batch()
    full = clipped_policy_loss(logprobs, logprobs, adv, mask, aggregation=aggregation)
    assert full.item() == pytest.approx(expected)
    halves = [
        clipped_policy_loss(
            logprobs[rows], logprobs[rows], adv[rows], mask[rows], aggregation=aggregation, **counts
        )
        for rows in (slice(0, 2), slice(2, 4))
    ]
    assert (halves[0] + halves[1]).item() == pytest.approx(expected)


def test_halves_with_local_counts_do_not_add_up():
    # Why the global counts exist: token-mean with local counts gives half 1 (3 - 2) / 4 = 0.25 and
    # half 2 6 / 2 = 3; neither their sum 3.25 nor their mean 1.625 is the full batch's 7/6.
    logprobs, adv, mask = _global_batch()
    halves = [
        clipped_policy_loss(logprobs[r], logprobs[r], adv[r], mask[r])
        for r in (slice(0, 2), slice(2, 4))
    ]
    assert [h.item() for h in halves] == pytest.approx([-0.25, -3.0])


def test_masked_aggregate_directly_by_hand():
    values = torch.tensor([[2.0, 4.0, 100.0], [6.0, 100.0, 100.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])  # a bool mask is accepted
    assert masked_aggregate(values, mask, "token-mean").item() == pytest.approx(
        4.0
    )  # (2 + 4 + 6) / 3
    assert masked_aggregate(values, mask, "token-mean", token_count=6).item() == pytest.approx(
        2.0
    )  # 12 / 6
    assert masked_aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx(
        4.5
    )  # (3 + 6) / 2
    assert masked_aggregate(
        values, mask, "seq-mean-token-mean", row_count=3
    ).item() == pytest.approx(3.0)  # 9 / 3
    assert masked_aggregate(values, mask, "seq-mean-token-sum-norm").item() == pytest.approx(
        2.0
    )  # 12 / (2 * 3)
    assert masked_aggregate(
        values, mask, "seq-mean-token-sum-norm", max_tokens=4
    ).item() == pytest.approx(1.5)
    assert AGGREGATIONS == ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def test_clip_fraction_by_hand():
    logprobs, old, adv = _example()
    # (0,0) and (1,0) are clipped (see the top of the file): 2 of 4 tokens
    assert clip_fraction(
        logprobs, old, adv, torch.ones(2, 2), clip_low=0.2, clip_high=0.28
    ) == pytest.approx(0.5)
    # masking out (1,0) and (1,1): 1 clipped of 2
    mask = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert clip_fraction(logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28) == pytest.approx(
        0.5
    )
    # masking out (0,0): 1 clipped of 3
    mask = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    assert clip_fraction(logprobs, old, adv, mask, clip_low=0.2, clip_high=0.28) == pytest.approx(
        1 / 3
    )


def test_clip_fraction_counts_only_the_side_where_clipping_binds():
    logprobs = torch.tensor([[-0.5, 0.5, 0.5, 0.0, 0.5, -0.5, 0.25]])
    adv = torch.tensor([[1.0, -1.0, 1.0, 1.0, 0.0, -1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]])
    # t0 A>0, ratio 0.6065 below the range  -> not clipped
    # t1 A<0, ratio 1.6487 above the range  -> not clipped
    # t2 A>0, ratio 1.6487 above            -> clipped but masked out
    # t3 ratio 1                            -> not clipped
    # t4 A=0                                -> not clipped
    # t5 A<0, ratio 0.6065 < 0.8            -> clipped
    # t6 A>0, ratio e^0.25 = 1.2840 > 1.28  -> clipped (not with clip_high 0.3: 1.284 < 1.3)
    assert clip_fraction(
        logprobs, torch.zeros(1, 7), adv, mask, clip_low=0.2, clip_high=0.28
    ) == pytest.approx(2 / 6)
    assert clip_fraction(
        logprobs, torch.zeros(1, 7), adv, mask, clip_low=0.2, clip_high=0.3
    ) == pytest.approx(1 / 6)


def test_clip_fraction_marks_exactly_the_zero_gradient_tokens():
    logprobs = torch.tensor([[-0.5, 0.5, 0.0, 0.5, -0.5, 0.25]], requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, 1.0, 1.0, -1.0, 1.0]])
    mask = torch.ones(1, 6)
    clipped_policy_loss(
        logprobs, torch.zeros(1, 6), adv, mask, clip_low=0.2, clip_high=0.28
    ).backward()
    # clipped by hand: t3 (A>0, 1.6487 > 1.28), t4 (A<0, 0.6065 < 0.8), t5 (A>0, 1.2840 > 1.28)
    assert [g == 0.0 for g in logprobs.grad[0].tolist()] == [False, False, False, True, True, True]
    assert (
        clip_fraction(logprobs.detach(), torch.zeros(1, 6), adv, mask, clip_low=0.2, clip_high=0.28)
        == 0.5
    )


def test_unknown_aggregation_is_an_error_naming_it():
    logprobs, old, adv = _example()
    with pytest.raises(ValueError, match="'seq-sum'"):
        clipped_policy_loss(logprobs, old, adv, torch.ones(2, 2), aggregation="seq-sum")


def test_empty_mask_is_an_error():
    logprobs, old, adv = _example()
    with pytest.raises(ValueError, match="selects no token"):
        clipped_policy_loss(logprobs, old, adv, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="selects no token"):
        clip_fraction(logprobs, old, adv, torch.zeros(2, 2), clip_low=0.2, clip_high=0.2)
    with pytest.raises(ValueError, match="selects no token"):
        masked_aggregate(torch.ones(2, 2), torch.zeros(2, 2), "seq-mean-token-mean", row_count=4)


def test_bad_shapes_clip_ranges_and_counts_are_errors():
    logprobs, old, _ = _example()
    mask = torch.ones(2, 2)
    with pytest.raises(ValueError, match="advantages"):
        clipped_policy_loss(logprobs, old, torch.ones(3), mask)
    with pytest.raises(ValueError, match="advantages"):
        clipped_policy_loss(logprobs, old, torch.ones(2, 3), mask)
    with pytest.raises(ValueError, match="clip_low"):
        clipped_policy_loss(logprobs, old, torch.ones(2), mask, clip_low=1.0)
    with pytest.raises(ValueError, match="clip_high"):
        clipped_policy_loss(logprobs, old, torch.ones(2), mask, clip_high=-0.1)
    with pytest.raises(ValueError, match="loss_mask"):
        masked_aggregate(torch.ones(2, 2), torch.ones(2, 3), "token-mean")
    with pytest.raises(ValueError, match="token_count"):
        masked_aggregate(torch.ones(2, 2), mask, "token-mean", token_count=0)
