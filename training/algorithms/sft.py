"""Supervised fine-tuning: cross-entropy on demonstration tokens, prompt tokens masked."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import torch

from training.algorithms.logprobs import first_trained_position, pad_batch, token_logprobs


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


def sft_settings(config) -> dict:
    """:func:`sft_train`'s keywords from a :class:`~training.config.RunConfig`."""
    return {
        "epochs": config.sft_epochs,
        "batch_size": config.sft_batch_size,
        "lr": config.sft_lr,
        "grad_clip": config.grad_clip,
        "seed": config.seed,
    }


def sft_train(
    policy,
    examples: list[tuple[list[int], list[int]]],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    grad_clip: float,
    seed: int,
    on_epoch: Callable[[int, int, float], None] | None = None,
) -> dict:
    """Cross-entropy on ``examples`` (``(ids, mask)`` pairs, the mask 1 on trained tokens).

    ``epochs`` epochs of shuffled batches of ``batch_size`` sequences (right-padded to
    ``[batch, tokens]`` with ``policy.pad_id``), AdamW under a one-cycle schedule peaking at
    ``lr``, gradients clipped to ``grad_clip``; after each epoch ``on_epoch(epoch, epochs,
    mean loss)`` (1-based), when given. ``policy`` is any object with ``model``, ``device``,
    ``pad_id`` and ``trainable_parameters()`` (a :class:`training.policy.Policy` or an
    agent policy).

    Returns:
        ``{"sft/examples", "sft/epochs", "sft/loss_first", "sft/loss_last", "sft/seconds"}``
        (the losses are per-epoch means in nats per token; only the first two keys when
        there is nothing to train).
    """
    started = time.monotonic()
    summary = {"sft/examples": len(examples), "sft/epochs": epochs}
    if not examples or epochs == 0:
        return summary
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=lr, weight_decay=0.0)
    batches = (len(examples) + batch_size - 1) // batch_size
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, total_steps=epochs * batches, pct_start=0.1
    )
    rng = random.Random(seed)
    policy.model.train()
    losses = []
    for _epoch in range(epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        epoch_losses = []
        for start in range(0, len(order), batch_size):
            batch = [examples[i] for i in order[start : start + batch_size]]
            ids, attention, mask = pad_batch(
                [b[0] for b in batch], [b[1] for b in batch], policy.pad_id, policy.device
            )
            logprobs, _ = token_logprobs(
                policy.model, ids, attention, start=first_trained_position(mask), with_entropy=False
            )
            loss = sft_loss(logprobs, mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), grad_clip)
            optimizer.step()
            scheduler.step()
            epoch_losses.append(loss.item())
        losses.append(sum(epoch_losses) / len(epoch_losses))
        if on_epoch is not None:
            on_epoch(len(losses), epochs, losses[-1])
    summary.update(
        {
            "sft/loss_first": losses[0],
            "sft/loss_last": losses[-1],
            "sft/seconds": time.monotonic() - started,
        }
    )
    return summary
