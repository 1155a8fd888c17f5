"""GRPO: group-relative advantages and the clipped policy-gradient loss.

Follows Shao et al., "DeepSeekMath" (arXiv:2402.03300), section 4.1: for a group of
G trajectories of one prompt with rewards r_1..r_G, each trajectory's advantage is
(r_i - mean(r)) / (std(r) + eps) and applies to every token it sampled. The loss is
PPO's clipped surrogate (Schulman et al., arXiv:1707.06347), aggregated either as in
the GRPO paper (``seq-mean-token-mean``: each trajectory's tokens averaged, then
trajectories averaged, so a long failed trajectory weighs no more than a short
success) or as in DAPO (``token-mean``: every sampled token weighs the same,
arXiv:2503.14476).
"""

from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, *, normalize_std: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages.

    Args:
        rewards: ``[num_groups, group_size]`` scalar rewards.
        normalize_std: divide by the group's standard deviation (population std,
            ``unbiased=False``); False gives mean-centring only (Dr. GRPO).

    Returns:
        ``[num_groups, group_size]``; a group whose rewards are all equal gets zeros.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not normalize_std:
        return centred
    return centred / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    aggregation: str = "token-mean",
) -> torch.Tensor:
    """PPO-clip surrogate, aggregated over the trained tokens.

    Args:
        logprobs: ``[B, T]`` current log-probabilities (requires grad).
        old_logprobs: ``[B, T]`` log-probabilities when the batch was sampled.
        advantages: ``[B]`` one advantage per trajectory.
        loss_mask: ``[B, T]`` 1 on sampled policy tokens, 0 on prompt, observation
            and padding tokens.

        aggregation: ``token-mean`` or ``seq-mean-token-mean`` (see the module doc).

    Returns:
        A scalar. With ``s = min(ratio*A, clip(ratio, 1-eps, 1+eps)*A)``:
        ``token-mean`` is ``-sum(s * mask) / sum(mask)``;
        ``seq-mean-token-mean`` is ``-mean_i(sum_t(s * mask)_i / sum_t(mask)_i)``
        over rows with at least one trained token.

    Raises:
        ValueError: the mask selects no token, or ``aggregation`` is unknown.
    """
    tokens = loss_mask.sum()
    if tokens <= 0:
        raise ValueError("loss_mask selects no token: nothing to train on")
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages[:, None]
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    if aggregation == "token-mean":
        return -(surrogate * loss_mask).sum() / tokens
    if aggregation == "seq-mean-token-mean":
        per_row = loss_mask.sum(dim=1)
        rows = per_row > 0
        return -((surrogate * loss_mask).sum(dim=1)[rows] / per_row[rows]).mean()
    raise ValueError(f"unknown loss aggregation {aggregation!r}; use token-mean or seq-mean-token-mean")
