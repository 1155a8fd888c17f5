"""Per-token log-probabilities of given sequences under a causal LM."""

from __future__ import annotations

import torch


def pad_batch(
    sequences: list[list[int]], masks: list[list[int]], pad_id: int, device: torch.device
):
    """Right-pad token ids and loss masks into tensors.

    Returns:
        ``(input_ids [B, T], attention [B, T], loss_mask [B, T])``; ``loss_mask`` is
        1 where a position's token is trained on.
    """
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(sequences), width), dtype=torch.long)
    loss_mask = torch.zeros((len(sequences), width), dtype=torch.float32)
    for i, (seq, mask) in enumerate(zip(sequences, masks)):
        if len(seq) != len(mask):
            raise ValueError(f"row {i}: {len(seq)} token ids but {len(mask)} mask entries")
        ids[i, : len(seq)] = torch.tensor(seq)
        attention[i, : len(seq)] = 1
        loss_mask[i, : len(seq)] = torch.tensor(mask, dtype=torch.float32)
    return ids.to(device), attention.to(device), loss_mask.to(device)


def token_logprobs(
    model,
    input_ids: torch.Tensor,
    attention: torch.Tensor,
    *,
    temperature: float = 1.0,
    start: int = 1,
    with_entropy: bool = True,
):
    """Log-probability of each token given the ones before it.

    Only positions from ``start`` on are computed: the model projects hidden states to
    logits for those positions alone (``logits_to_keep``), and each log-probability is
    ``logit[token] - logsumexp(logits)`` rather than a full-vocabulary ``log_softmax``,
    so prompt positions cost no vocabulary-wide work. The entropy, a metric, is computed
    without gradient.

    Args:
        input_ids, attention: ``[B, T]``.
        temperature: logits are divided by it, matching the sampling distribution.
        start: the first position whose token's log-probability is wanted (>= 1; position
            0 has no prediction). Callers pass the first position any loss mask selects.
        with_entropy: also return the entropy of each predicted distribution.

    Returns:
        ``(logprobs [B, T], entropy [B, T] or None)``; positions before ``start`` are 0.
    """
    width = input_ids.shape[1]
    start = max(1, min(start, width - 1)) if width > 1 else 1
    keep = width - start + 1  # logits at positions start-1 .. T-1; the last predicts past the end
    logits = model(input_ids=input_ids, attention_mask=attention, logits_to_keep=keep).logits
    logits = logits[:, :-1, :].float() / temperature  # [B, T - start, V]
    targets = input_ids[:, start:, None]
    normaliser = torch.logsumexp(logits, dim=-1)
    chosen = logits.gather(-1, targets).squeeze(-1) - normaliser
    pad = torch.zeros((input_ids.shape[0], start), dtype=chosen.dtype, device=chosen.device)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            probs = torch.softmax(logits, dim=-1)
            entropy = torch.cat([pad, normaliser - (probs * logits).sum(-1)], dim=1)
    return torch.cat([pad, chosen], dim=1), entropy


def first_trained_position(loss_mask: torch.Tensor) -> int:
    """The first column of ``loss_mask`` ``[B, T]`` that any row trains on (1 when none does)."""
    columns = loss_mask.any(dim=0).nonzero()
    return int(columns[0]) if len(columns) else 1
