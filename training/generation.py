"""Batched sampling with a KV cache that keeps the sampled ids and their log-probabilities."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from training.policy import Policy


@dataclass
class Sample:
    """What the policy sampled after one context.

    Attributes:
        token_ids: the sampled ids, ending with the stop id when one was sampled.
        logprobs: log-probability of each sampled id under the temperature-scaled
            distribution, same length as ``token_ids``.
        stopped: True when a stop id ended the sample, False when it hit the token budget.
    """

    token_ids: list[int]
    logprobs: list[float]
    stopped: bool


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Mask logits outside the smallest set whose probability reaches ``top_p``.

    Args:
        logits: ``[batch, vocab]``.
    Returns:
        ``[batch, vocab]`` with excluded entries set to ``-inf``.
    """
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
    # Drop a token when the mass *before* it already reaches top_p (keeps at least one).
    drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


@torch.no_grad()
def sample_batch(
    policy: Policy,
    contexts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop_ids: tuple[int, ...] = (),
    generator: torch.Generator | None = None,
) -> list[Sample]:
    """Sample a continuation of every context in one batch, reusing the KV cache.

    Contexts are left-padded to a common length; position ids count only real
    tokens, so a padded row sees the same positions as it would alone.

    Args:
        contexts: token ids per row; each must be shorter than the model's
            ``n_positions`` minus ``max_new_tokens``.
        max_new_tokens: the token budget per row.
        temperature: logits are divided by it before sampling (must be > 0).
        top_p: nucleus sampling mass in (0, 1].
        stop_ids: ids that end a row (kept as its last sampled token).
        generator: the RNG, for reproducible sampling.

    Raises:
        ValueError: a context is empty or too long, or temperature/top_p are out of range.
    """
    if temperature <= 0 or not 0 < top_p <= 1:
        raise ValueError(f"temperature must be > 0 and top_p in (0, 1]; got {temperature}, {top_p}")
    limit = policy.model.config.n_positions - max_new_tokens
    for row in contexts:
        if not row or len(row) > limit:
            raise ValueError(f"context of {len(row)} tokens; it must hold 1..{limit} tokens for this model")
    model, device = policy.model, policy.device
    was_training = model.training
    model.eval()
    batch = len(contexts)
    width = max(len(row) for row in contexts)
    input_ids = torch.full((batch, width), policy.pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    for i, row in enumerate(contexts):
        input_ids[i, width - len(row) :] = torch.tensor(row)
        attention[i, width - len(row) :] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)

    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
    cache = out.cache
    logits = out.logits[:, -1, :].float()
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    stopped = torch.zeros(batch, dtype=torch.bool, device=device)
    stop_tensor = torch.tensor(list(stop_ids), dtype=torch.long, device=device)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    logprobs: list[list[float]] = [[] for _ in range(batch)]
    for _ in range(max_new_tokens):
        scaled = logits / temperature
        log_dist = torch.log_softmax(scaled, dim=-1)
        probs = torch.softmax(_top_p_filter(scaled, top_p), dim=-1)
        next_ids = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        chosen_logprobs = log_dist.gather(-1, next_ids[:, None]).squeeze(-1)
        for i in (~finished).nonzero().flatten().tolist():
            tokens[i].append(int(next_ids[i]))
            logprobs[i].append(float(chosen_logprobs[i]))
        is_stop = torch.isin(next_ids, stop_tensor) if len(stop_ids) else torch.zeros_like(finished)
        stopped |= is_stop & ~finished
        finished |= is_stop
        if bool(finished.all()):
            break
        next_ids = next_ids.masked_fill(finished, policy.pad_id)
        attention = torch.cat([attention, (~finished).long()[:, None]], dim=1)
        positions = positions[:, -1:] + 1
        out = model(
            input_ids=next_ids[:, None], attention_mask=attention, position_ids=positions, cache=cache, use_cache=True
        )
        cache = out.cache
        logits = out.logits[:, -1, :].float()
    model.train(was_training)
    return [Sample(token_ids=tokens[i], logprobs=logprobs[i], stopped=bool(stopped[i])) for i in range(batch)]
