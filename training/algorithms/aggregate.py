"""Reducing a ``[B, T]`` per-token loss to one scalar: the three aggregations in use.

The choice changes what the gradient favours, not just its scale:

``token-mean``
    Every trained token weighs the same, whichever trajectory it is in: a long
    trajectory contributes in proportion to its length (DAPO's token-level
    policy-gradient loss, Yu et al., arXiv:2503.14476, section 3.3).
``seq-mean-token-mean``
    Each trajectory's tokens are averaged, then trajectories are averaged, so every
    trajectory weighs the same; the GRPO objective as written (Shao et al.,
    arXiv:2402.03300, eq. 3). A token of a short trajectory then weighs more than
    one of a long trajectory: short correct answers get larger per-token updates
    and long wrong answers smaller penalties, so wrong answers drift longer.
``seq-mean-token-sum-norm``
    Each trajectory's tokens are summed and divided by a constant (the padded width,
    or ``max_tokens``) instead of by its own length, then trajectories are averaged;
    Dr. GRPO's fix for that length bias (Liu et al., arXiv:2503.20783).

Data parallelism: each rank holds a slice of the batch and its gradients are
averaged (or summed) across ranks afterwards. Dividing by the rank's *local* token
or row count weighs a token on a rank with few tokens more than one on a rank with
many, so the result differs from the single-process loss. Pass ``token_count`` /
``row_count`` as the *global* counts (all-reduced across ranks before the loss) and
the per-rank losses add up to the full-batch loss.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def masked_aggregate(
    values: torch.Tensor,
    loss_mask: torch.Tensor,
    aggregation: str,
    *,
    token_count: float | None = None,
    row_count: float | None = None,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """Aggregate per-token values over the trained tokens.

    Args:
        values: ``[B, T]`` per-token values (a surrogate, a KL estimate, ...).
        loss_mask: ``[B, T]`` 1 (or True) on trained tokens, 0 on prompt,
            observation and padding tokens.
        aggregation: one of :data:`AGGREGATIONS`.
        token_count: divisor for ``token-mean`` instead of ``loss_mask.sum()``; under
            ``torch.distributed`` pass the global number of trained tokens across
            all ranks. Ignored by the other aggregations.
        row_count: divisor for the two ``seq-mean-*`` aggregations instead of the
            number of rows with at least one trained token; under
            ``torch.distributed`` pass the global number of such rows. Ignored by
            ``token-mean``.
        max_tokens: the constant per-row normaliser of ``seq-mean-token-sum-norm``
            (e.g. the configured generation budget). When None it is ``T =
            values.shape[1]``, the padded width of the batch passed in; note that
            this width can differ between batches and between ranks, so pass it
            whenever those must agree. Ignored by the other aggregations.

    Returns:
        A scalar tensor, with ``m`` the mask, ``v`` the values and ``R`` the rows
        having at least one trained token:

        - ``token-mean``: ``sum(v * m) / (token_count or sum(m))``;
        - ``seq-mean-token-mean``:
          ``sum_{i in R}(sum_t(v * m)_i / sum_t(m)_i) / (row_count or |R|)``;
        - ``seq-mean-token-sum-norm``:
          ``sum(v * m) / ((row_count or |R|) * (max_tokens or T))``.

    Raises:
        ValueError: ``aggregation`` is unknown (the message names it), the shapes
            differ, the mask selects no token, or a given count is not positive.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"unknown loss aggregation {aggregation!r}; use one of {', '.join(AGGREGATIONS)}"
        )
    if values.shape != loss_mask.shape or values.dim() != 2:
        raise ValueError(
            f"values {tuple(values.shape)} and loss_mask {tuple(loss_mask.shape)} must both be "
            "[B, T]"
        )
    for name, count in (
        ("token_count", token_count),
        ("row_count", row_count),
        ("max_tokens", max_tokens),
    ):
        if count is not None and count <= 0:
            raise ValueError(f"{name} must be positive, got {count}")
    mask = loss_mask.to(values.dtype)
    tokens_per_row = mask.sum(dim=1)
    if tokens_per_row.sum() <= 0:
        raise ValueError("loss_mask selects no token: nothing to train on")
    masked = values * mask

    if aggregation == "token-mean":
        divisor = token_count if token_count is not None else tokens_per_row.sum()
        return masked.sum() / divisor

    rows = tokens_per_row > 0
    rows_divisor = row_count if row_count is not None else rows.sum()
    if aggregation == "seq-mean-token-mean":
        per_row_mean = masked.sum(dim=1)[rows] / tokens_per_row[rows]
        return per_row_mean.sum() / rows_divisor

    # seq-mean-token-sum-norm: the same constant normaliser for every row.
    width = max_tokens if max_tokens is not None else values.shape[1]
    return masked.sum() / (rows_divisor * width)
