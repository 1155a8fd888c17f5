"""REINFORCE Leave-One-Out (RLOO) advantages.

Kool, van Hoof and Welling, "Buy 4 REINFORCE Samples, Get a Baseline for Free!"
(ICLR 2019 workshop), and Ahmadian et al., "Back to Basics: Revisiting REINFORCE Style
Optimization for Learning from Human Feedback in LLMs" (arXiv:2402.14740): sample K
trajectories for a prompt; the baseline for trajectory i is the mean reward of the
*other* K - 1,

    A_i = r_i - (1 / (K - 1)) * sum_{j != i} r_j = K / (K - 1) * (r_i - mean(r)).

The baseline does not depend on trajectory i's own sample, so the policy-gradient
estimate stays unbiased. Centring on the full group mean, which includes r_i (GRPO
without its std division, i.e. Dr. GRPO), gives exactly (K - 1) / K times this
advantage: the same direction, scaled down. Advantages of a group sum to 0, and a
group whose rewards are all equal gets zeros. One advantage applies
to every token of its trajectory: pass the result, flattened to ``[B]``, to
``training.algorithms.ppo.clipped_policy_loss``.
"""

from __future__ import annotations

import torch


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Leave-one-out advantages for groups of K trajectories.

    Args:
        rewards: ``[G, K]`` scalar rewards, one row per prompt (group), K
            trajectories each.

    Returns:
        ``[G, K]`` floating-point ``r_i - mean_{j != i} r_j`` within each row.

    Raises:
        ValueError: ``rewards`` is not 2-D, or ``K < 2`` (a group needs >= 2
            trajectories for a leave-one-out baseline).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [G, K], got shape {tuple(rewards.shape)}")
    group_size = rewards.shape[1]
    if group_size < 2:
        raise ValueError(
            f"a group needs >= 2 trajectories for a leave-one-out baseline, got K={group_size}"
        )
    if not rewards.is_floating_point():
        rewards = rewards.to(torch.float32)
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (group_size - 1)
    return rewards - others_mean
