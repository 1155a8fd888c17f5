"""Held-out evaluation: the policy on a task set it never trains on, every ``eval_every`` steps.

Each task of the evaluation set gets ``eval_samples`` trajectories, rolled out exactly as in
training (same turns, same sandboxes, hidden tests graded in a fresh sandbox) but with
their own RNG, so evaluating does not change what training samples. The result is the
unbiased pass@k (Chen et al. 2021, arXiv:2107.03374, eq. 1) for k = 1 and every k in
(5, 10, ``eval_samples``) not above ``eval_samples``, averaged over tasks, and the mean
reward. Trajectories lost to infrastructure errors are left out of the counts, not
counted as failures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from tasks_library.evaluation import pass_at_k
from training.rollout import RolloutConfig, TaskSpec, collect_rollouts


@dataclass
class HeldOutResult:
    """pass@k by ``"pass@k"`` name, mean reward, tasks evaluated, samples dropped, seconds."""

    pass_at_k: dict[str, float]
    reward_mean: float
    tasks: int
    dropped: int
    seconds: float


def evaluation_ks(samples: int) -> list[int]:
    """The k of pass@k reported for ``samples`` samples per task: 1, 5, 10 and ``samples`` itself,
    within it."""
    return sorted({k for k in (1, 5, 10, samples) if k <= samples})


def heldout_evaluate(
    policy,
    specs: list[TaskSpec],
    *,
    samples: int,
    rollout_config: RolloutConfig,
    seed: int,
    scorer=None,
) -> HeldOutResult:
    """Roll out ``samples`` trajectories per held-out task and score them.

    Args:
        specs: the evaluation set's tasks (never in the training pool).
        rollout_config: the run's rollout settings (its mode included); the group size is
            ``samples``.
        seed: seeds this evaluation's own sampling generator.

    Raises:
        ValueError: ``specs`` is empty or ``samples`` < 1.
    """
    if not specs or samples < 1:
        raise ValueError(
            f"held-out evaluation needs tasks and samples >= 1; got {len(specs)} tasks, {samples} "
            "samples"
        )
    started = time.monotonic()
    generator = torch.Generator(device=policy.device).manual_seed(seed)
    rollouts, _ = collect_rollouts(
        policy,
        specs,
        replace(rollout_config, group_size=samples),
        generator=generator,
        scorer=scorer,
    )
    per_task: dict[int, list] = {}
    for rollout in rollouts:
        if not rollout.dropped:
            per_task.setdefault(rollout.task.task_version_id, []).append(rollout)
    kept = [r for r in rollouts if not r.dropped]
    scores = {}
    for k in evaluation_ks(samples):
        eligible = [members for members in per_task.values() if len(members) >= k]
        if eligible:
            scores[f"pass@{k}"] = sum(
                pass_at_k(len(m), sum(r.passed for r in m), k) for m in eligible
            ) / len(eligible)
    return HeldOutResult(
        pass_at_k=scores,
        reward_mean=sum(r.reward for r in kept) / len(kept) if kept else 0.0,
        tasks=len(per_task),
        dropped=len(rollouts) - len(kept),
        seconds=time.monotonic() - started,
    )
