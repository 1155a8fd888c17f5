"""The k3 KL estimator and the KL penalty against values worked out by hand."""

import math

import pytest
import torch

from training.algorithms.kl import k3, kl_penalty

LN2, LN3 = math.log(2), math.log(3)


def test_k3_by_hand():
    logprobs = torch.tensor([[0.0, LN2, -1.0]])
    ref = torch.tensor([[LN2, 0.0, -1.0]])
    values = k3(logprobs, ref)
    # log_r = ref - lp:  ln2 -> 2 - 0.693147 - 1 = 0.306853
    #                   -ln2 -> 0.5 + 0.693147 - 1 = 0.193147
    #                      0 -> 1 - 0 - 1 = 0 exactly
    assert values[0, :2].tolist() == pytest.approx([0.306853, 0.193147], abs=1e-6)
    assert values[0, 2].item() == 0.0


def test_k3_is_never_negative():
    generator = torch.Generator().manual_seed(0)
    logprobs = -5 * torch.rand(8, 16, generator=generator)
    ref = -5 * torch.rand(8, 16, generator=generator)
    # e^y >= 1 + y for every real y, so e^y - y - 1 >= 0
    assert bool((k3(logprobs, ref) >= 0).all())


def test_k3_gradient_by_hand_and_zero_at_equality():
    logprobs = torch.tensor([[0.0, LN2, -1.0]], requires_grad=True)
    ref = torch.tensor([[LN2, 0.0, -1.0]], requires_grad=True)
    k3(logprobs, ref).sum().backward()
    # d/dlp (e^(ref-lp) - (ref-lp) - 1) = 1 - e^(ref-lp):  1 - 2 = -1 ; 1 - 0.5 = 0.5 ; 1 - 1 = 0
    assert logprobs.grad[0].tolist() == pytest.approx([-1.0, 0.5, 0.0], abs=1e-6)
    assert ref.grad is None  # the reference policy is constant


def test_k3_clamps_the_log_ratio_to_keep_it_finite():
    logprobs = torch.tensor([[0.0, 100.0]], requires_grad=True)
    ref = torch.tensor([[100.0, 0.0]])
    values = k3(logprobs, ref)
    # log_r = 100 -> clamped to 20: e^20 - 20 - 1 = 485165195.4 - 21 = 485165174.4
    # (e^100 is inf in float32)
    assert values[0, 0].item() == pytest.approx(485165174.4, rel=1e-6)
    # log_r = -100 -> clamped to -20: e^-20 + 20 - 1 = 19.000000002
    assert values[0, 1].item() == pytest.approx(19.0, abs=1e-5)
    values.sum().backward()
    # the clamp binds, so the value is a constant there
    assert logprobs.grad.tolist() == [[0.0, 0.0]]


def test_kl_penalty_token_mean_by_hand():
    logprobs = torch.tensor([[0.0, LN2, -1.0]], requires_grad=True)
    ref = torch.tensor([[LN2, 0.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the last token (k3 = e^6 - 7 = 396.43) is masked out
    penalty = kl_penalty(logprobs, ref, mask, coef=0.1)
    # 0.1 * (0.306853 + 0.193147) / 2 = 0.1 * 0.5 / 2 = 0.025
    assert penalty.item() == pytest.approx(0.025, abs=1e-7)
    penalty.backward()
    # 0.1 * (1 - e^(ref-lp)) / 2:  0.1 * -1 / 2 = -0.05 ; 0.1 * 0.5 / 2 = 0.025 ; masked 0
    assert logprobs.grad[0].tolist() == pytest.approx([-0.05, 0.025, 0.0], abs=1e-7)


def test_kl_penalty_is_finite_when_a_masked_position_is_extreme():
    # padding can hold any log-probability; without the clamp e^200 = inf and inf * 0 = nan
    logprobs = torch.tensor([[0.0, -200.0]])
    ref = torch.tensor([[LN2, 0.0]])
    penalty = kl_penalty(logprobs, ref, torch.tensor([[1.0, 0.0]]), coef=1.0)
    assert penalty.item() == pytest.approx(0.306853, abs=1e-6)  # 2 - ln2 - 1


# Two rows: row 0 log_r = ln2, -ln2 (2 tokens, k3 sum 0.5); row 1 log_r = ln3 then a masked token.
# Row 1's k3 = 3 - ln3 - 1 = 0.901388.
def _two_rows():
    logprobs = torch.tensor([[0.0, LN2], [0.0, 0.0]])
    ref = torch.tensor([[LN2, 0.0], [LN3, 7.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    return logprobs, ref, mask


def test_kl_penalty_aggregations_by_hand():
    logprobs, ref, mask = _two_rows()
    # token-mean: 0.04 * (0.5 + 0.901388) / 3 = 0.018685
    assert kl_penalty(logprobs, ref, mask, coef=0.04).item() == pytest.approx(0.018685, abs=1e-6)
    # seq-mean-token-mean: 0.04 * (0.5 / 2 + 0.901388 / 1) / 2 = 0.04 * 0.575694 = 0.023028
    assert kl_penalty(
        logprobs, ref, mask, coef=0.04, aggregation="seq-mean-token-mean"
    ).item() == pytest.approx(0.023028, abs=1e-6)
    # seq-mean-token-sum-norm: 0.04 * (0.5 + 0.901388) / (2 rows * T=2) = 0.04 * 0.350347 = 0.014014
    assert kl_penalty(
        logprobs, ref, mask, coef=0.04, aggregation="seq-mean-token-sum-norm"
    ).item() == pytest.approx(0.014014, abs=1e-6)


def test_kl_penalty_rows_with_global_counts_add_up_to_the_full_batch():
    logprobs, ref, mask = _two_rows()
    # token-mean, token_count=3: 0.04 * 0.5 / 3 + 0.04 * 0.901388 / 3 = 0.018685
    rows = [
        kl_penalty(logprobs[i : i + 1], ref[i : i + 1], mask[i : i + 1], coef=0.04, token_count=3)
        for i in (0, 1)
    ]
    assert (rows[0] + rows[1]).item() == pytest.approx(0.018685, abs=1e-6)
    # seq-mean-token-mean, row_count=2: 0.04 * 0.25 / 2 + 0.04 * 0.901388 / 2 = 0.023028
    rows = [
        kl_penalty(
            logprobs[i : i + 1],
            ref[i : i + 1],
            mask[i : i + 1],
            coef=0.04,
            aggregation="seq-mean-token-mean",
            row_count=2,
        )
        for i in (0, 1)
    ]
    assert (rows[0] + rows[1]).item() == pytest.approx(0.023028, abs=1e-6)


def test_kl_penalty_bad_inputs_are_errors():
    logprobs, ref, mask = _two_rows()
    with pytest.raises(ValueError, match="'kl-mean'"):
        kl_penalty(logprobs, ref, mask, coef=0.04, aggregation="kl-mean")
    with pytest.raises(ValueError, match="selects no token"):
        kl_penalty(logprobs, ref, torch.zeros(2, 2), coef=0.04)
