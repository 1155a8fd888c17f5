"""DAPO's soft overlong punishment: a length penalty added to the task reward.

Yu et al., "DAPO: An Open-Source LLM Reinforcement Learning System at Scale"
(arXiv:2503.14476), section 3.4, eq. 13. A response cut off at the generation limit
is not necessarily wrong in its reasoning, yet a hard 0/-1 for truncation is a noisy
signal. DAPO instead grows the penalty linearly through a "soft punish cache" of
``cache_length`` tokens just below the hard limit ``max_length``:

    R_length(L) = 0                                   L <= max_length - cache_length
                = ((max_length - cache_length) - L) / cache_length
                                                      max_length - cache_length < L <= max_length
                = -1                                  L > max_length

and adds it to the correctness reward (the paper uses ``max_length = 20480`` with
``cache_length = 4096``, so responses up to 16384 tokens are never penalised).

DAPO's other three techniques live elsewhere and are not re-implemented here:

- Clip-Higher (section 3.1): ``training.algorithms.ppo.clipped_policy_loss`` with
  ``clip_high > clip_low`` (DAPO: 0.28 and 0.2).
- Dynamic sampling (section 3.2): ``tasks_library.difficulty``, whose sampler skips
  groups whose rewards are all equal.
- Token-level policy-gradient loss (section 3.3): the ``token-mean`` aggregation of
  ``training.algorithms.aggregate.masked_aggregate``.
"""

from __future__ import annotations

import torch


def overlong_penalty(
    response_lengths: torch.Tensor, *, max_length: int, cache_length: int
) -> torch.Tensor:
    """Soft overlong punishment for each response (DAPO eq. 13).

    Args:
        response_lengths: ``[B]`` response lengths in tokens (generated tokens only,
            not the prompt).
        max_length: the hard limit ``L_max`` in tokens; longer responses get -1.
        cache_length: the width ``L_cache`` in tokens of the linear ramp ending at
            ``max_length``; ``1 <= cache_length <= max_length``.

    Returns:
        ``[B]`` float32 penalties in ``[-1, 0]``: 0 up to ``max_length -
        cache_length`` tokens, then ``((max_length - cache_length) - L) /
        cache_length`` (reaching -1 at ``L == max_length``), then -1.

    Raises:
        ValueError: ``cache_length < 1`` or ``cache_length > max_length``.
    """
    if cache_length < 1 or cache_length > max_length:
        raise ValueError(
            f"cache_length must be between 1 and max_length={max_length} tokens, got {cache_length}"
        )
    lengths = response_lengths.to(torch.float32)
    soft_start = max_length - cache_length
    ramp = (soft_start - lengths) / cache_length
    penalty = torch.where(lengths <= soft_start, torch.zeros_like(lengths), ramp)
    return torch.where(lengths > max_length, torch.full_like(lengths, -1.0), penalty)
