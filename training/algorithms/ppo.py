"""PPO's clipped surrogate loss, with DAPO's decoupled clip range.

Schulman et al., "Proximal Policy Optimization Algorithms" (arXiv:1707.06347), eq. 7:
for each sampled token with probability ratio ``r = pi(a|s) / pi_old(a|s)`` and
advantage ``A``, maximise

    min(r * A, clip(r, 1 - eps, 1 + eps) * A).

The ``min`` makes the objective pessimistic: once the ratio has moved past the clip
bound *in the direction the advantage rewards* (up for ``A > 0``, down for
``A < 0``), the clipped term is the smaller one, it does not depend on the policy,
and the token stops contributing gradient. A move in the other direction is never
clipped, so a mistake can always be undone.

Yu et al., "DAPO" (arXiv:2503.14476), section 3.1 ("Clip-Higher"), decouples the two
bounds into ``[1 - clip_low, 1 + clip_high]``. With ``clip_high > clip_low``
(DAPO uses 0.2 and 0.28) a low-probability token with a positive advantage can grow
further before it is clipped, which keeps exploration (entropy) from collapsing.
``clip_low == clip_high`` is plain PPO.

GRPO (arXiv:2402.03300) uses this loss with one advantage per trajectory
(``training.algorithms.grpo.group_advantages``); RLOO uses it with
``training.algorithms.rloo.rloo_advantages``. How the per-token surrogate becomes a
scalar is ``training.algorithms.aggregate.masked_aggregate``.
"""

from __future__ import annotations

import torch

from training.algorithms.aggregate import masked_aggregate


def _per_token_advantages(advantages: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
    """``[B]`` broadcast over tokens to ``[B, 1]``, or ``[B, T]`` as given."""
    if advantages.dim() == 1 and advantages.shape[0] == logprobs.shape[0]:
        return advantages[:, None]
    if advantages.shape == logprobs.shape:
        return advantages
    raise ValueError(
        f"advantages {tuple(advantages.shape)} must be [B] or [B, T] for logprobs "
        f"{tuple(logprobs.shape)}"
    )


def _check_clip(clip_low: float, clip_high: float) -> None:
    if not 0 <= clip_low < 1:
        raise ValueError(f"clip_low must be in [0, 1), got {clip_low}")
    if clip_high < 0:
        raise ValueError(f"clip_high must be >= 0, got {clip_high}")


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token-mean",
    token_count: float | None = None,
    row_count: float | None = None,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """Negative PPO-clip surrogate, aggregated over the trained tokens.

    Args:
        logprobs: ``[B, T]`` log-probabilities (nats) of the sampled tokens under the
            current policy; requires grad.
        old_logprobs: ``[B, T]`` log-probabilities of the same tokens under the
            policy that sampled them; treated as constants (detached).
        advantages: ``[B]`` one advantage per trajectory, applied to each of its
            tokens, or ``[B, T]`` one per token; treated as constants (detached).
        loss_mask: ``[B, T]`` 1 on sampled policy tokens, 0 on prompt, observation
            and padding tokens.
        clip_low: the ratio is clipped below at ``1 - clip_low``.
        clip_high: the ratio is clipped above at ``1 + clip_high`` (DAPO's
            clip-higher when larger than ``clip_low``).
        aggregation, token_count, row_count, max_tokens: passed to
            :func:`training.algorithms.aggregate.masked_aggregate`; give global
            counts under ``torch.distributed``.

    Returns:
        A scalar to minimise: ``-masked_aggregate(s, loss_mask, aggregation)`` with
        ``ratio = exp(logprobs - old_logprobs)`` and
        ``s = min(ratio * A, clamp(ratio, 1 - clip_low, 1 + clip_high) * A)``.

    Raises:
        ValueError: ``advantages`` is neither ``[B]`` nor ``[B, T]``; ``clip_low``
            is outside ``[0, 1)`` or ``clip_high`` is negative; or as
            ``masked_aggregate`` (unknown aggregation, mask selecting no token).
    """
    _check_clip(clip_low, clip_high)
    adv = _per_token_advantages(advantages, logprobs).detach()
    ratio = torch.exp(logprobs - old_logprobs.detach())
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * adv
    surrogate = torch.minimum(unclipped, clipped)
    return -masked_aggregate(
        surrogate,
        loss_mask,
        aggregation,
        token_count=token_count,
        row_count=row_count,
        max_tokens=max_tokens,
    )


@torch.no_grad()
def clip_fraction(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
) -> float:
    """Fraction of trained tokens whose surrogate is the clipped term (no gradient).

    A token counts when clipping binds for its advantage's sign: ``A > 0`` and
    ``ratio > 1 + clip_high``, or ``A < 0`` and ``ratio < 1 - clip_low`` (strict
    inequalities; on the bound both terms are equal). A ratio outside the range on
    the other side (``A > 0`` and ratio below ``1 - clip_low``, ``A < 0`` and ratio
    above ``1 + clip_high``) is not clipped by the ``min`` and does not count, nor
    does a token with ``A == 0``.

    Args:
        logprobs, old_logprobs, advantages, loss_mask, clip_low, clip_high: as in
            :func:`clipped_policy_loss`.

    Returns:
        ``count / sum(loss_mask)`` in ``[0, 1]``, over this batch's trained tokens
        (a local fraction; it has no global-count option).

    Raises:
        ValueError: the mask selects no token, ``advantages`` has a bad shape, or
            the clip range is invalid.
    """
    _check_clip(clip_low, clip_high)
    adv = _per_token_advantages(advantages, logprobs)
    ratio = torch.exp(logprobs - old_logprobs)
    above = (adv > 0) & (ratio > 1 + clip_high)
    below = (adv < 0) & (ratio < 1 - clip_low)
    mask = loss_mask.to(ratio.dtype)
    tokens = mask.sum()
    if tokens <= 0:
        raise ValueError("loss_mask selects no token: nothing to train on")
    return float(((above | below).to(ratio.dtype) * mask).sum() / tokens)
