"""What a training run does under ``rollout_mode="completion"`` (through :mod:`training.modes`).

- the policy: a checkpoint from ``model_path`` (optionally under LoRA,
  :func:`~training.policy.load_policy`), or the small default one built here (its tokenizer
  trained on the prompts and reference solutions, weights seeded);
- the warm start: SFT on ``(prompt, completion)`` pairs, the task versions' reference
  solutions or the lines of ``sft_data``, prompt tokens masked.

The rollouts are the one loop of :mod:`training.rollout`, whose environment under this mode is
:class:`~training.agents.completion.CompletionEnvironment`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from tasks_library.models import TaskVersion
from training.algorithms.sft import sft_settings, sft_train
from training.config import RunConfig
from training.policy import Policy, build_default_policy, load_policy


def build_policy(config: RunConfig, versions: list[TaskVersion], device: torch.device) -> Policy:
    """The policy loaded from ``model_path`` (optionally under LoRA), or the small default one
    built here (tokenizer trained on the prompts and reference solutions, weights seeded)."""
    if config.model_path:
        # Full fine-tuning keeps float32 weights (bf16 weights lose small AdamW updates); under
        # LoRA the frozen base may stay in bf16 and only the adapters train.
        return load_policy(
            Path(config.model_path),
            device=device,
            lora=config.lora or None,
            dtype=None if config.lora else torch.float32,
        )
    return build_default_policy(
        [v.prompt + v.reference_solution for v in versions],
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        seed=config.seed,
        device=device,
    )


def sft_demonstrations(versions: list[TaskVersion], config: RunConfig) -> list[tuple[str, str]]:
    """``(prompt, completion)`` pairs of the warm start: the task versions' reference solutions,
    or the lines of ``config.sft_data`` (``{"task_id", "completion"}`` JSONL, as evaluate_samples
    reads) for the run's tasks.

    Raises:
        ValueError: ``sft_data`` names no task of the run (the message says which file).
    """
    if not config.sft_data:
        return [(v.prompt, v.reference_solution) for v in versions]
    from tasks_library.evaluation import read_samples  # noqa: PLC0415 (read only with sft_data)

    by_task = {v.task.task_id: v for v in versions}
    pairs = [
        (by_task[row["task_id"]].prompt, row["completion"])
        for row in read_samples(Path(config.sft_data))
        if row["task_id"] in by_task
    ]
    if not pairs:
        raise ValueError(
            f"config key 'sft_data': {config.sft_data} holds no demonstration for the run's tasks"
        )
    return pairs


def _sft_examples(
    policy: Policy, versions: list[TaskVersion], config: RunConfig
) -> list[tuple[list[int], list[int]]]:
    """The demonstrations as ``(ids, mask)`` pairs: ``[bos] + prompt + completion + [end]``
    cut to ``n_positions`` tokens, the mask 1 on completion tokens; pairs cut to no completion
    token are left out."""
    limit = policy.n_positions
    examples = []
    for prompt_text, completion in sft_demonstrations(versions, config):
        prompt = [policy.bos_id, *policy.encode(prompt_text)]
        solution = [*policy.encode(completion), policy.end_id]
        ids = (prompt + solution)[:limit]
        mask = ([0] * len(prompt) + [1] * len(solution))[:limit]
        if any(mask):
            examples.append((ids, mask))
    return examples


def sft_warm_start(
    policy: Policy,
    versions: list[TaskVersion],
    config: RunConfig,
    *,
    on_epoch: Callable[[int, int, float], None] | None = None,
) -> dict:
    """Cross-entropy on demonstrations (:func:`sft_demonstrations`), prompt tokens masked.

    ``sft_epochs`` epochs of shuffled batches of ``sft_batch_size`` sequences (padded to
    ``[batch, tokens]``), AdamW under a one-cycle schedule peaking at ``sft_lr``; after each
    epoch ``on_epoch(epoch, epochs, mean loss)`` (1-based), when given.

    Returns:
        ``{"sft/examples", "sft/epochs", "sft/loss_first", "sft/loss_last", "sft/seconds"}``
        (the losses are per-epoch means in nats per token; only the first two keys when
        there is nothing to train).
    """
    examples = _sft_examples(policy, versions, config)
    return sft_train(
        policy,
        examples,
        **sft_settings(config),
        on_epoch=on_epoch,
    )
