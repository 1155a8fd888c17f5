"""Supervised fine-tuning: cross-entropy on demonstration tokens, prompt tokens masked."""

from __future__ import annotations

import torch


def sft_loss(logprobs: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the demonstration tokens.

    Args:
        logprobs: ``[B, T]`` log-probability of each token given its prefix.
        loss_mask: ``[B, T]`` 1 on demonstration (solution) tokens, 0 elsewhere.

    Returns:
        A scalar, ``-sum(logprobs * mask) / sum(mask)``.

    Raises:
        ValueError: the mask selects no token.
    """
    tokens = loss_mask.sum()
    if tokens <= 0:
        raise ValueError("loss_mask selects no token: nothing to train on")
    return -(logprobs * loss_mask).sum() / tokens
