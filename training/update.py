"""One policy update of the GRPO family over graded rollouts.

Reads top to bottom: shape rewards (DAPO overlong), group advantages (GRPO or RLOO),
build the padded batch of trained sequences (token in, token out: the sampled ids and
observation ids as they were, the loss mask 1 on sampled ids only), then ``ppo_epochs``
passes of the PPO-clip loss (with DAPO's clip-higher when ``clip_high > clip_low``)
plus the optional k3 KL penalty against the frozen reference policy.

Data parallel: each rank holds whole groups. Token and row counts are summed over all
ranks so every rank divides by the *global* count; the rank's loss is multiplied by the
world size because DistributedDataParallel (and FSDP2's reduce-scatter) averages gradients.
The result equals one process training on the whole batch
(tests/training/test_ddp_matches_single_rank.py, tests/training/test_fsdp_matches_single_rank.py).
"""

from __future__ import annotations

import torch

from training import distributed, sharding
from training.algorithms.dapo import overlong_penalty
from training.algorithms.grpo import group_advantages
from training.algorithms.kl import k3, kl_penalty
from training.algorithms.logprobs import first_trained_position, pad_batch, token_logprobs
from training.algorithms.ppo import clip_fraction, clipped_policy_loss
from training.algorithms.rloo import rloo_advantages
from training.config import RunConfig


def shape_rewards(rollouts: list, config: RunConfig) -> None:
    """Add the overlong component to each scored rollout's reward (DAPO eq. 13).

    The sampled-token budget of a trajectory is ``max_turns * max_new_tokens``; the
    penalty ramps from 0 to -1 over its last ``overlong_cache_tokens`` tokens. Off when 0.
    """
    scored = [r for r in rollouts if not r.dropped]
    if not config.overlong_cache_tokens or not scored:
        return
    lengths = torch.tensor([r.sampled_tokens for r in scored])
    penalties = overlong_penalty(
        lengths,
        max_length=config.max_turns * config.max_new_tokens,
        cache_length=config.overlong_cache_tokens,
    )
    for rollout, penalty in zip(scored, penalties.tolist()):
        # A shaping term in [-1, 0] added to the reward (kept beside the [0, 1] components).
        rollout.reward_components["overlong"] = penalty
        rollout.reward += penalty


def assign_advantages(rollouts: list, config: RunConfig) -> tuple[list, int, int]:
    """Set ``rollout.advantage`` for every scored rollout, group by group.

    Returns:
        ``(trained, zero_groups, groups)``: the rollouts of groups whose rewards differ
        (all-equal groups have zero advantage and teach nothing), the count of such
        all-equal groups, and the count of groups.
    """
    groups: dict[int, list] = {}
    for rollout in rollouts:
        if not rollout.dropped:
            groups.setdefault(rollout.group, []).append(rollout)
    trained, zero_groups = [], 0
    for members in groups.values():
        rewards = torch.tensor([[m.reward for m in members]], dtype=torch.float32)
        if len(members) < 2 or float(rewards.max()) == float(rewards.min()):
            zero_groups += 1
            for member in members:
                member.advantage = 0.0
            continue
        if config.advantage_estimator == "rloo":
            advantages = rloo_advantages(rewards)[0]
        else:
            advantages = group_advantages(rewards, normalize_std=config.normalize_std)[0]
        for member, advantage in zip(members, advantages.tolist()):
            member.advantage = advantage
        trained += members
    return trained, zero_groups, len(groups)


def grpo_update(
    policy,
    optimizer: torch.optim.Optimizer,
    rollouts: list,
    config: RunConfig,
    *,
    model: torch.nn.Module | None = None,
    reference: torch.nn.Module | None = None,
    scheduler=None,
) -> dict:
    """Shape rewards, assign advantages and take ``config.ppo_epochs`` gradient steps.

    Args:
        policy: the :class:`training.policy.Policy` that sampled ``rollouts``.
        rollouts: this rank's graded rollouts (whole groups); dropped ones take no part.
        model: the module to differentiate (the DDP wrapper or the FSDP2-sharded copy under
            torchrun: training/sharding.py); default ``policy.model``. Its trainable parameters
            are the ones ``optimizer`` updates and whose gradient norm is clipped.
        reference: the frozen reference policy for the KL penalty (``config.kl_coef > 0``).
        scheduler: stepped once per call, after the last epoch.

    Returns:
        Metrics (sums over ranks where noted): ``loss/policy``, ``loss/kl``,
        ``policy/entropy``, ``policy/clip_fraction``, ``groups/zero_advantage``,
        ``groups/total``, ``tokens/trained`` (global), ``policy/grad_norm``.
    """
    model = model or policy.model
    shape_rewards(rollouts, config)
    trained, zero_groups, groups = assign_advantages(rollouts, config)
    local_rows = len(trained)
    batch = _batch(policy, trained) if trained else None
    local_tokens = float(batch[2].sum()) if batch else 0.0
    rows, tokens, zero_groups, groups = distributed.sum_across(
        [local_rows, local_tokens, zero_groups, groups], policy.device
    )
    metrics = {
        "groups/zero_advantage": int(zero_groups),
        "groups/total": int(groups),
        "tokens/trained": int(tokens),
        "loss/policy": 0.0,
        "loss/kl": 0.0,
        "policy/entropy": 0.0,
        "policy/clip_fraction": 0.0,
    }
    if tokens == 0:  # every rank agrees: nothing to learn from this batch (nor a scheduler step)
        return metrics
    if batch is None:
        batch = _placeholder_batch(policy)
    ids, attention, loss_mask, advantages = batch
    counts = {"token_count": tokens, "row_count": rows}
    world = distributed.world_size()
    model.train()
    start = first_trained_position(loss_mask)
    ref_logprobs = None
    if config.kl_coef > 0 and reference is not None:
        with torch.no_grad():
            ref_logprobs, _ = token_logprobs(
                reference,
                ids,
                attention,
                temperature=config.temperature,
                start=start,
                with_entropy=False,
            )
    sums = {"loss/policy": 0.0, "loss/kl": 0.0, "policy/entropy": 0.0, "policy/clip_fraction": 0.0}
    old_logprobs = None
    for epoch in range(config.ppo_epochs):
        logprobs, entropy = token_logprobs(
            model,
            ids,
            attention,
            temperature=config.temperature,
            start=start,
            with_entropy=epoch == 0,
        )
        if old_logprobs is None:
            # The policy that sampled the batch is the one before this call's first step, so its
            # log-probabilities are the first epoch's (no separate forward pass; ratio 1 there).
            old_logprobs = logprobs.detach()
        if local_rows == 0:
            # This rank trains nothing this step but must still join the gradient all-reduce.
            loss = logprobs.sum() * 0.0
            policy_loss = kl_loss = loss
        else:
            policy_loss = clipped_policy_loss(
                logprobs,
                old_logprobs,
                advantages,
                loss_mask,
                clip_low=config.clip_low,
                clip_high=config.clip_high,
                aggregation=config.loss_aggregation,
                **_aggregation_counts(config, counts),
            )
            kl_loss = torch.zeros((), device=policy.device)
            if ref_logprobs is not None:
                kl_loss = kl_penalty(
                    logprobs,
                    ref_logprobs,
                    loss_mask,
                    coef=config.kl_coef,
                    aggregation=config.loss_aggregation,
                    **_aggregation_counts(config, counts),
                )
            loss = policy_loss + kl_loss
        optimizer.zero_grad(set_to_none=True)
        (loss * world).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], config.grad_clip
        )
        optimizer.step()
        if epoch == 0 and local_rows:
            sums["policy/entropy"] = float((entropy * loss_mask).sum())
            if ref_logprobs is not None:
                sums["loss/kl"] = float((k3(logprobs.detach(), ref_logprobs) * loss_mask).sum())
        if epoch == config.ppo_epochs - 1 and local_rows:
            # How often the clip bound in the last epoch (0 with one epoch: the ratio is 1 there).
            sums["policy/clip_fraction"] = clip_fraction(
                logprobs.detach(),
                old_logprobs,
                advantages,
                loss_mask,
                clip_low=config.clip_low,
                clip_high=config.clip_high,
            ) * float(loss_mask.sum())
            sums["loss/policy"] = float(policy_loss.detach())
    if scheduler is not None:
        scheduler.step()
    entropy_sum, clip_sum, kl_sum, policy_sum = distributed.sum_across(
        [
            sums["policy/entropy"],
            sums["policy/clip_fraction"],
            sums["loss/kl"],
            sums["loss/policy"],
        ],
        policy.device,
    )
    metrics.update(
        {
            # the loss is already normalised by global counts on every rank: its global value is the
            # sum
            "loss/policy": policy_sum,
            "loss/kl": kl_sum / tokens,  # mean k3 per trained token
            "policy/entropy": entropy_sum / tokens,
            "policy/clip_fraction": clip_sum / tokens,
            "policy/grad_norm": sharding.grad_norm_value(grad_norm),
            "policy/lr": optimizer.param_groups[0]["lr"],
        }
    )
    return metrics


def _aggregation_counts(config: RunConfig, counts: dict) -> dict:
    extra = dict(counts)
    if config.loss_aggregation == "seq-mean-token-sum-norm":
        extra["max_tokens"] = config.max_turns * config.max_new_tokens
    return extra


def _batch(policy, trained: list):
    sequences, masks = zip(*(r.sequence_and_mask() for r in trained))
    ids, attention, loss_mask = pad_batch(
        list(sequences), list(masks), policy.pad_id, policy.device
    )
    advantages = torch.tensor(
        [r.advantage for r in trained], dtype=torch.float32, device=policy.device
    )
    return ids, attention, loss_mask, advantages


def _placeholder_batch(policy):
    """One two-token row with an empty loss mask, for a rank with nothing to train."""
    ids, attention, loss_mask = pad_batch(
        [[policy.bos_id, policy.pad_id]], [[0, 0]], policy.pad_id, policy.device
    )
    return ids, attention, loss_mask, torch.zeros(1, device=policy.device)
