"""The trainer loop: SFT warm start, then GRPO steps over multi-turn rollouts.

One step: sample tasks -> roll out a group per task (policy writes code, the
sandbox runs the visible tests, the policy may revise, up to K turns) -> grade in a
fresh sandbox on the hidden tests -> group-relative advantages -> one clipped
policy-gradient update -> persist the step and broadcast it to the console.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import numpy as np
import torch
from django.conf import settings

from sandboxes.queue import live_workers
from tasks_library.models import TaskVersion
from tasks_library.difficulty import DifficultySampler, pass_rate
from tasks_library.selectors import runtimes_of
from tasks_library.services import task_version_record_attempts
from training import services
from training.algorithms.grpo import clipped_policy_loss, group_advantages
from training.algorithms.logprobs import pad_batch, token_logprobs
from training.algorithms.sft import sft_loss
from training.config import RunConfig
from training.models import TrainingRun
from training.policy import Policy, build_default_policy, load_policy
from training.rollout import RolloutConfig, TaskSpec, collect_rollouts

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, numpy and torch; return a torch generator for sampling."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def sft_warm_start(policy: Policy, versions: list[TaskVersion], config: RunConfig) -> dict:
    """Cross-entropy on the reference solutions, prompt tokens masked.

    Returns:
        ``{"sft/examples", "sft/epochs", "sft/loss_first", "sft/loss_last", "sft/seconds"}``.
    """
    started = time.monotonic()
    limit = policy.model.config.n_positions
    examples = []
    for v in versions:
        prompt = [policy.bos_id, *policy.encode(v.prompt)]
        solution = [*policy.encode(v.reference_solution), policy.end_id]
        ids = (prompt + solution)[:limit]
        mask = ([0] * len(prompt) + [1] * len(solution))[:limit]
        if any(mask):
            examples.append((ids, mask))
    summary = {"sft/examples": len(examples), "sft/epochs": config.sft_epochs}
    if not examples or config.sft_epochs == 0:
        return summary
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.sft_lr, weight_decay=0.0)
    total = config.sft_epochs * ((len(examples) + config.sft_batch_size - 1) // config.sft_batch_size)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=config.sft_lr, total_steps=total, pct_start=0.1)
    rng = random.Random(config.seed)
    policy.model.train()
    losses = []
    for _epoch in range(config.sft_epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        epoch_losses = []
        for start in range(0, len(order), config.sft_batch_size):
            batch = [examples[i] for i in order[start : start + config.sft_batch_size]]
            ids, attention, mask = pad_batch([b[0] for b in batch], [b[1] for b in batch], policy.pad_id, policy.device)
            logprobs, _entropy = token_logprobs(policy.model, ids, attention)
            loss = sft_loss(logprobs, mask)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            epoch_losses.append(loss.item())
        losses.append(sum(epoch_losses) / len(epoch_losses))
    summary.update({"sft/loss_first": losses[0], "sft/loss_last": losses[-1], "sft/seconds": time.monotonic() - started})
    return summary


def grpo_update(policy: Policy, optimizer: torch.optim.Optimizer, rollouts: list, config: RunConfig) -> dict:
    """Assign group-relative advantages to ``rollouts`` and take one gradient step.

    Dropped (infra_error) rollouts take no part. Groups whose rewards are all equal
    have zero advantage everywhere and add nothing; they are counted.

    Returns:
        Metrics: ``loss/policy``, ``policy/entropy``, ``groups/zero_advantage``,
        ``tokens/trained``.
    """
    groups: dict[int, list] = {}
    for rollout in rollouts:
        if not rollout.dropped:
            groups.setdefault(rollout.group, []).append(rollout)
    zero_groups = 0
    for members in groups.values():
        rewards = torch.tensor([[m.reward for m in members]], dtype=torch.float32)
        advantages = group_advantages(rewards, normalize_std=config.normalize_std)[0]
        if len(members) < 2 or bool((advantages == 0).all()):
            zero_groups += 1
        for member, adv in zip(members, advantages.tolist()):
            member.advantage = adv if len(members) >= 2 else 0.0
    trained = [r for members in groups.values() for r in members if r.advantage != 0.0]
    metrics = {"groups/zero_advantage": zero_groups, "groups/total": len(groups), "tokens/trained": 0}
    if not trained:
        metrics.update({"loss/policy": 0.0, "policy/entropy": 0.0})
        return metrics
    sequences, masks = zip(*(r.sequence_and_mask() for r in trained))
    ids, attention, loss_mask = pad_batch(list(sequences), list(masks), policy.pad_id, policy.device)
    advantages = torch.tensor([r.advantage for r in trained], dtype=torch.float32, device=policy.device)
    policy.model.train()
    with torch.no_grad():
        old_logprobs, _ = token_logprobs(policy.model, ids, attention, temperature=config.temperature)
    # PPO: several passes over the same batch; the clip keeps each token's ratio near 1.
    for epoch in range(config.ppo_epochs):
        logprobs, entropy = token_logprobs(policy.model, ids, attention, temperature=config.temperature)
        loss = clipped_policy_loss(
            logprobs, old_logprobs, advantages, loss_mask, clip_eps=config.clip_eps, aggregation=config.loss_aggregation
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
        optimizer.step()
        if epoch == 0:
            metrics["policy/entropy"] = ((entropy.detach() * loss_mask).sum() / loss_mask.sum()).item()
    with torch.no_grad():
        ratio = torch.exp(logprobs.detach() - old_logprobs)
        clipped = ((ratio - 1).abs() > config.clip_eps).float()
    metrics.update(
        {
            "loss/policy": loss.item(),
            "policy/clip_fraction": ((clipped * loss_mask).sum() / loss_mask.sum()).item(),
            "tokens/trained": int(loss_mask.sum()),
        }
    )
    return metrics


def _task_specs(policy: Policy, versions: list[TaskVersion], config: RunConfig) -> list[TaskSpec]:
    """The RL task pool: prompts that fit the context, shortest first, capped at ``train_tasks``."""
    sized = []
    for v in versions:
        length = len(policy.encode(v.prompt))
        if length <= config.max_prompt_tokens:
            sized.append((length, v))
    sized.sort(key=lambda pair: (pair[0], pair[1].task.task_id))
    return [
        TaskSpec(
            task_version_id=v.pk,
            prompt=v.prompt,
            entry_point=v.entry_point,
            visible_tests=v.test_suite.visible_tests,
            hidden_tests=v.test_suite.hidden_tests,
            timeout_s=v.test_suite.timeout_s,
            harness=v.test_suite.harness,
            files=v.files,
            test_timeout_s=v.test_suite.test_timeout_s,
        )
        for _length, v in sized[: config.train_tasks]
    ]


def _record_attempts(rollouts: list, sampler: DifficultySampler) -> None:
    """Feed each group's hidden-test results into its task version's pass-rate counts,
    and let dynamic sampling count the groups whose rewards are all equal."""
    by_version: dict[int, list] = {}
    for rollout in rollouts:
        if not rollout.dropped:
            by_version.setdefault(rollout.task.task_version_id, []).append(rollout)
    for version_id, members in by_version.items():
        passed = sum(m.passed for m in members)
        task_version_record_attempts(version_id=version_id, passed=passed, total=len(members))
        sampler.keep_group([m.reward for m in members])


def run_dir(run_id: int) -> Path:
    """Where a run's checkpoints and logs live."""
    return Path(settings.VAR_DIR) / "runs" / str(run_id)


def train_run(run_id: int) -> None:
    """Train run ``run_id`` to the end and record its outcome on the run.

    The run must be ``launching``; it becomes ``running``, then ``succeeded``,
    ``cancelled`` (seen between steps) or ``failed`` with the error as reason.
    """
    run = TrainingRun.objects.select_related("task_set").get(pk=run_id)
    config = RunConfig.from_dict(run.config)
    services.run_transition(run_id=run_id, to_status=TrainingRun.RUNNING, reason="trainer started")
    try:
        _train(run, config)
    except Exception as exc:
        log.exception("run %s failed", run_id)
        services.run_transition(run_id=run_id, to_status=TrainingRun.FAILED, reason=f"{type(exc).__name__}: {exc}")
        raise


def _train(run: TrainingRun, config: RunConfig) -> None:
    versions = list(run.task_versions.select_related("task", "test_suite").order_by("task__task_id"))
    for runtime in runtimes_of(versions):
        if not live_workers(runtime):
            # Without workers every rollout would come back infra_error: fail now, saying why.
            raise RuntimeError(f"no {runtime} sandbox worker is running; start one with "
                               f"`python manage.py sandbox_worker --runtime {runtime}`")
    generator = seed_everything(config.seed)
    if config.model_path:
        policy = load_policy(Path(config.model_path))
    else:
        policy = build_default_policy(
            [v.prompt + v.reference_solution for v in versions],
            n_embd=config.n_embd, n_layer=config.n_layer, n_head=config.n_head, seed=config.seed,
        )
    if policy.device.type != "cpu":
        generator = torch.Generator(device=policy.device).manual_seed(config.seed)
    sft = sft_warm_start(policy, versions, config)
    services.run_summary_update(run_id=run.pk, **sft, device=str(policy.device))

    specs = _task_specs(policy, versions, config)
    if not specs:
        raise ValueError(f"no task prompt fits max_prompt_tokens={config.max_prompt_tokens}; raise it")
    services.run_summary_update(run_id=run.pk, rl_tasks=len(specs))
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=config.lr, weight_decay=0.0)
    rollout_config = RolloutConfig(
        group_size=config.group_size, max_turns=config.max_turns, max_new_tokens=config.max_new_tokens,
        temperature=config.temperature, top_p=config.top_p,
    )
    buckets = {v.pk: pass_rate(v).bucket for v in versions}
    sampler = DifficultySampler(specs, lambda spec: buckets[spec.task_version_id], config.difficulty_weights, config.seed)
    for step in range(1, config.steps + 1):
        if TrainingRun.objects.filter(pk=run.pk, status=TrainingRun.CANCELLED).exists():
            return
        tasks = sampler.sample(min(config.tasks_per_step, len(specs)))
        rollouts, times = collect_rollouts(policy, tasks, rollout_config, generator=generator)
        _record_attempts(rollouts, sampler)
        started = time.monotonic()
        metrics = grpo_update(policy, optimizer, rollouts, config)
        update_s = time.monotonic() - started
        scored = [r for r in rollouts if not r.dropped]
        metrics.update(
            {
                "reward/pass_rate": sum(r.passed for r in scored) / max(1, len(scored)),
                "rollouts/dropped": len(rollouts) - len(scored),
                "sampler/groups_skipped": sampler.groups_skipped,
                "rollouts/turns_mean": sum(len(r.turns) for r in rollouts) / len(rollouts),
                "timing/generation_s": times.generation_s,
                "timing/sandbox_s": times.sandbox_s,
                "timing/grading_s": times.grading_s,
                "timing/update_s": update_s,
                "tokens/generated": times.generated_tokens,
            }
        )
        services.step_record(run_id=run.pk, step=step, rollouts=rollouts, metrics=metrics)
    checkpoint = run_dir(run.pk) / "checkpoint-final"
    policy.save(checkpoint)
    services.run_summary_update(run_id=run.pk, checkpoint=str(checkpoint))
    services.run_transition(run_id=run.pk, to_status=TrainingRun.SUCCEEDED, reason=f"trained {config.steps} steps")
