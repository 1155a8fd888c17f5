"""Batched sampling that keeps the sampled ids and their log-probabilities.

Works with any ``transformers`` causal LM (GPT-2, Llama, Qwen2, ...) and with a
``peft`` model around one. With ``use_cache=True`` (the default) the keys and values
of the context are computed once and reused (the KV cache); ``use_cache=False``
recomputes the whole sequence at every step, the baseline the cache is measured
against (``benchmarks/trainer_throughput.py``).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch

from training.policy import Policy


@dataclass
class Sample:
    """What the policy sampled after one context.

    Attributes:
        token_ids: the sampled ids, ending with the stop id (or the whole stop
            sequence) when one was sampled.
        logprobs: log-probability of each sampled id under the temperature-scaled
            distribution (before top-p filtering), same length as ``token_ids``.
        stopped: True when a stop id or stop sequence ended the sample, False when it
            hit the token budget.
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
    sorted_probs = torch.softmax(sorted_logits, dim=-1)
    # Drop a token when the mass *before* it already reaches top_p (keeps at least one).
    drop_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _draw(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One id per row of ``probs`` by inverse-CDF sampling.

    One uniform number per row instead of ``torch.multinomial``'s one per vocabulary
    entry (its exponential draws were 14 % of a CPU generation step). Ids of
    probability 0 (cut by top-p) are never drawn.

    Args:
        probs: ``[batch, vocab]``, rows summing to 1 (up to rounding).
    Returns:
        ``[batch]`` ids.
    """
    cdf = probs.cumsum(dim=-1)
    # u in (0, total]: the first id whose cumulative mass reaches u. An id of probability 0
    # has the same cumulative mass as the one before it, so it is never the first.
    u = (
        1
        - torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cdf.dtype)
    ) * cdf[:, -1:]
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


def _forward_signature(model: torch.nn.Module) -> tuple[str | None, bool]:
    """How ``model`` takes a KV cache: ``(keyword or None, accepts logits_to_keep)``.

    ``transformers`` 5 names the cache argument ``cache``; older releases and remote
    code name it ``past_key_values``. A peft model passes keywords on to its base.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    name = next((n for n in ("cache", "past_key_values") if n in params), None)
    return name, "logits_to_keep" in params


def _new_cache(model: torch.nn.Module, max_length: int):
    """A preallocated KV cache of ``max_length`` positions, or None for the model's default.

    ``transformers``' ``StaticCache`` writes each step's keys and values in place, where the
    default ``DynamicCache`` concatenates (copies) the whole cache at every step: 17 % of a
    generation step of the small CPU policy. Used for the models ``transformers`` marks as
    static-cache capable (``_can_compile_fullgraph``: GPT-2, Llama, Qwen2, ...).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not getattr(base, "_can_compile_fullgraph", False):
        return None
    try:
        # inside the try: a transformers without StaticCache falls back to the default cache
        from transformers import StaticCache  # noqa: PLC0415

        return StaticCache(config=base.config, max_cache_len=max_length)
    except (ImportError, TypeError, ValueError, AttributeError):
        return None


def _cache_of(output) -> object:
    """The KV cache a forward pass returned, under either name."""
    for name in ("cache", "past_key_values"):
        value = output.get(name)
        if value is not None:
            return value
    raise ValueError(
        f"the model returned no KV cache ({type(output).__name__} has {list(output.keys())}); "
        f"sample with use_cache=False"
    )


def _check_arguments(
    policy: Policy, contexts, max_new_tokens, temperature, top_p, stop_sequences
) -> None:
    if not (
        isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    for sequence in stop_sequences:
        if not sequence:
            raise ValueError(
                "stop_sequences holds an empty sequence; each must have at least one id"
            )
    limit = policy.n_positions - max_new_tokens
    for row in contexts:
        if not row or len(row) > limit:
            raise ValueError(
                f"context of {len(row)} tokens; with max_new_tokens={max_new_tokens} it must hold "
                f"1..{limit} tokens for this model ({policy.n_positions} positions)"
            )


def _sample(
    policy,
    contexts,
    max_new_tokens,
    temperature,
    top_p,
    stop_ids,
    stop_sequences,
    generator,
    use_cache,
    cache_name,
    extra,
):
    """The sampling loop of :func:`sample_batch`.

    Returns:
        ``(sampled [B, max_new_tokens], logprobs [B, max_new_tokens], lengths [B], stopped [B])``;
        row ``i`` holds ``lengths[i]`` real sampled ids, the rest is filler.
    """
    model, device = policy.model, policy.device
    batch = len(contexts)
    width = max(len(row) for row in contexts)
    input_ids = torch.full((batch, width), policy.pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    for i, row in enumerate(contexts):
        input_ids[i, width - len(row) :] = torch.tensor(row)
        attention[i, width - len(row) :] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)

    cache = _new_cache(model, width + max_new_tokens) if use_cache else None
    given = {cache_name: cache} if cache is not None else {}
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        use_cache=use_cache,
        **given,
        **extra,
    )
    cache = _cache_of(out) if use_cache else None
    logits = out.logits[:, -1, :].float()
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    stopped = torch.zeros(batch, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch, dtype=torch.long, device=device)
    stop_tensor = torch.tensor(list(stop_ids), dtype=torch.long, device=device)
    stop_tensors = [torch.tensor(list(s), dtype=torch.long, device=device) for s in stop_sequences]
    sampled = torch.zeros((batch, max_new_tokens), dtype=torch.long, device=device)
    sampled_logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
    for step in range(max_new_tokens):
        scaled = logits / temperature
        log_dist = torch.log_softmax(scaled, dim=-1)
        probs = (
            log_dist.exp() if top_p >= 1 else torch.softmax(_top_p_filter(scaled, top_p), dim=-1)
        )
        next_ids = _draw(probs, generator)
        sampled[:, step] = next_ids
        sampled_logprobs[:, step] = log_dist.gather(-1, next_ids[:, None]).squeeze(-1)
        lengths += (~finished).long()
        hit = torch.isin(next_ids, stop_tensor) if len(stop_ids) else torch.zeros_like(finished)
        for sequence in stop_tensors:
            if step + 1 >= len(sequence):
                hit |= (sampled[:, step + 1 - len(sequence) : step + 1] == sequence).all(dim=-1)
        stopped |= hit & ~finished
        finished |= hit
        if step == max_new_tokens - 1 or bool(finished.all()):
            break
        next_ids = next_ids.masked_fill(finished, policy.pad_id)
        attention = torch.cat([attention, (~finished).long()[:, None]], dim=1)
        if use_cache:
            positions = positions[:, -1:] + 1
            out = model(
                input_ids=next_ids[:, None],
                attention_mask=attention,
                position_ids=positions,
                use_cache=True,
                **{cache_name: cache},
                **extra,
            )
            cache = _cache_of(out)
        else:
            input_ids = torch.cat([input_ids, next_ids[:, None]], dim=1)
            positions = (attention.cumsum(-1) - 1).clamp(min=0)
            out = model(
                input_ids=input_ids,
                attention_mask=attention,
                position_ids=positions,
                use_cache=False,
                **extra,
            )
        logits = out.logits[:, -1, :].float()
    return sampled, sampled_logprobs, lengths, stopped


@torch.no_grad()
def sample_batch(
    policy: Policy,
    contexts: list[list[int]],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop_ids: tuple[int, ...] = (),
    stop_sequences: tuple[tuple[int, ...], ...] = (),
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> list[Sample]:
    """Sample a continuation of every context in one batch.

    Contexts are left-padded to a common length (``[batch, width]``, pad id
    ``policy.pad_id``, attention 0); position ids count only real tokens, so a padded
    row sees the same positions as it would alone. A row that has stopped is fed pad
    tokens (attention 0) until every row has stopped or the budget is spent; it still
    draws from ``generator`` every step, so the draws of the other rows do not depend
    on when it stopped.

    Args:
        contexts: token ids per row; each must hold 1 to ``policy.n_positions -
            max_new_tokens`` tokens.
        max_new_tokens: the token budget per row (>= 1).
        temperature: logits are divided by it before sampling (finite, > 0).
        top_p: nucleus sampling mass in (0, 1]; 1 samples from the whole vocabulary.
        stop_ids: ids that end a row; the stop id is kept as its last sampled token.
        stop_sequences: id sequences that end a row as soon as its *sampled* ids end
            with one of them (ids of the context do not count towards a match); the
            whole sequence is kept at the end of ``token_ids``.
        generator: the RNG, for reproducible sampling (on ``policy.device``).
        use_cache: reuse the keys and values of earlier positions (one token per forward
            after the first); False recomputes the full ``[batch, width + t]`` sequence
            at every step. Both sample the same ids up to float rounding.

    Returns:
        One :class:`Sample` per context, in order.

    Raises:
        ValueError: a context is empty or too long, ``max_new_tokens`` < 1,
            temperature/top_p out of range, an empty stop sequence, or ``use_cache``
            with a model that returns no cache.
    """
    _check_arguments(policy, contexts, max_new_tokens, temperature, top_p, stop_sequences)
    if not contexts:
        return []
    model = policy.model
    cache_name, keeps_logits = _forward_signature(model)
    if use_cache and cache_name is None:
        raise ValueError(
            f"{type(model).__name__}.forward takes no KV cache; sample with use_cache=False"
        )
    extra = {"logits_to_keep": 1} if keeps_logits else {}
    was_training = model.training
    model.eval()
    try:
        sampled, sampled_logprobs, lengths, stopped = _sample(
            policy,
            contexts,
            max_new_tokens,
            temperature,
            top_p,
            stop_ids,
            stop_sequences,
            generator,
            use_cache,
            cache_name,
            extra,
        )
    finally:
        model.train(was_training)
    lengths_list = lengths.tolist()
    ids_rows, logprob_rows, stopped_list = (
        sampled.tolist(),
        sampled_logprobs.tolist(),
        stopped.tolist(),
    )
    return [
        Sample(
            token_ids=ids_rows[i][: lengths_list[i]],
            logprobs=logprob_rows[i][: lengths_list[i]],
            stopped=stopped_list[i],
        )
        for i in range(len(contexts))
    ]
