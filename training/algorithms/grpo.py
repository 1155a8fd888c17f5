"""GRPO: group-relative advantages.

Follows Shao et al., "DeepSeekMath" (arXiv:2402.03300), section 4.1: for a group of
G trajectories of one prompt with rewards r_1..r_G, each trajectory's advantage is
(r_i - mean(r)) / (std(r) + eps) and applies to every token it sampled (outcome
supervision, section 4.1.2). The group mean replaces PPO's learned value function as
the baseline. Liu et al.'s Dr. GRPO (arXiv:2503.20783) drops the std division
(``normalize_std=False``), which otherwise up-weights groups whose rewards barely
differ (too easy or too hard prompts).

The rest of the GRPO objective (eq. 3) lives in one module each:

- the clipped surrogate: ``training.algorithms.ppo.clipped_policy_loss``;
- how per-token terms become a scalar (``seq-mean-token-mean`` as in the paper,
  ``token-mean`` as in DAPO, ``seq-mean-token-sum-norm`` as in Dr. GRPO):
  ``training.algorithms.aggregate.masked_aggregate``;
- the per-token KL penalty to the reference policy (eq. 4):
  ``training.algorithms.kl.kl_penalty``.
"""

from __future__ import annotations

import torch


def group_advantages(
    rewards: torch.Tensor, *, normalize_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Group-relative advantages.

    Args:
        rewards: ``[num_groups, group_size]`` scalar rewards.
        normalize_std: divide by the group's standard deviation (population std,
            ``unbiased=False``); False gives mean-centring only (Dr. GRPO).
        eps: added to the std so a group of equal rewards does not divide by 0.

    Returns:
        ``[num_groups, group_size]``; a group whose rewards are all equal gets zeros.
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if not normalize_std:
        return centred
    return centred / (rewards.std(dim=1, unbiased=False, keepdim=True) + eps)
