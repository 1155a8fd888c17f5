"""The k3 estimator of KL(pi || pi_ref) and the KL penalty built on it.

J. Schulman, "Approximating KL Divergence" (2020), http://joschu.net/blog/kl-approx.html:
for a token ``x`` sampled from ``pi`` and ``log_r = log pi_ref(x) - log pi(x)``,

    k3 = exp(log_r) - log_r - 1.

Since ``E_pi[exp(log_r)] = 1``, ``k3`` is an unbiased estimate of ``KL(pi || pi_ref)``;
since ``e^y >= 1 + y`` it is never negative, and it is exactly 0 where the two
log-probabilities agree. It has much lower variance than ``-log_r`` (k1). GRPO
(Shao et al., arXiv:2402.03300, eq. 4) adds ``beta * k3`` per token to its loss
instead of folding a KL penalty into the reward as PPO-RLHF does.

Its gradient with respect to ``log pi(x)`` is ``1 - exp(log_r)``: zero at equality,
pushing ``log pi`` down where the policy puts more mass than the reference and up
where it puts less.
"""

from __future__ import annotations

import torch

from training.algorithms.aggregate import masked_aggregate

LOG_RATIO_CLAMP = 20.0
"""``log_r`` is clamped to ``[-20, 20]`` before ``exp``: ``exp(20) ~ 4.9e8`` is finite in
float32/bf16, whereas a log-ratio above about 88.7 overflows float32 to ``inf`` (and a
``0 * inf`` in a masked-out padding position makes the whole loss ``nan``)."""


def k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref).

    Args:
        logprobs: ``[B, T]`` log-probabilities (nats) of the sampled tokens under the
            policy being trained.
        ref_logprobs: ``[B, T]`` log-probabilities of the same tokens under the
            frozen reference policy; detached, so no gradient reaches it.

    Returns:
        ``[B, T]`` ``exp(log_r) - log_r - 1`` with
        ``log_r = clamp(ref_logprobs - logprobs, -20, 20)``; ``>= 0`` everywhere and
        exactly 0 where the log-probabilities are equal. Where the clamp binds the
        value is the constant ``e^{+-20} -+ 20 - 1`` and its gradient is 0.
    """
    log_ratio = torch.clamp(ref_logprobs.detach() - logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(log_ratio) - log_ratio - 1


def kl_penalty(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    coef: float,
    aggregation: str = "token-mean",
    token_count: float | None = None,
    row_count: float | None = None,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """The KL term to add to the policy loss: ``coef`` times the aggregated k3.

    Args:
        logprobs: ``[B, T]`` current log-probabilities (requires grad).
        ref_logprobs: ``[B, T]`` reference-policy log-probabilities (constant).
        loss_mask: ``[B, T]`` 1 on trained tokens, 0 elsewhere.
        coef: the KL coefficient (GRPO's ``beta``; 0.04 in the paper).
        aggregation, token_count, row_count, max_tokens: passed to
            :func:`training.algorithms.aggregate.masked_aggregate`; use the same as
            for the policy loss, with global counts under ``torch.distributed``.

    Returns:
        A scalar, ``coef * masked_aggregate(k3(logprobs, ref_logprobs), loss_mask,
        aggregation)``; gradients flow into ``logprobs`` only.

    Raises:
        ValueError: as ``masked_aggregate`` (unknown aggregation, mask selecting no
            token).
    """
    per_token = k3(logprobs, ref_logprobs)
    return coef * masked_aggregate(
        per_token,
        loss_mask,
        aggregation,
        token_count=token_count,
        row_count=row_count,
        max_tokens=max_tokens,
    )
