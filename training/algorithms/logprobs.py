"""Per-token log-probabilities of given sequences under a causal LM."""

from __future__ import annotations

import torch


def pad_batch(sequences: list[list[int]], masks: list[list[int]], pad_id: int, device: torch.device):
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


def token_logprobs(model, input_ids: torch.Tensor, attention: torch.Tensor, *, temperature: float = 1.0):
    """Log-probability of each token given the ones before it.

    Args:
        input_ids, attention: ``[B, T]``.
        temperature: logits are divided by it, matching the sampling distribution.

    Returns:
        ``(logprobs [B, T], entropy [B, T])``; position 0 has no prediction and is 0.
    """
    logits = model(input_ids=input_ids, attention_mask=attention).logits.float() / temperature
    log_dist = torch.log_softmax(logits[:, :-1, :], dim=-1)
    chosen = log_dist.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    entropy = -(log_dist.exp() * log_dist).sum(-1)
    zeros = torch.zeros_like(chosen[:, :1])
    return torch.cat([zeros, chosen], dim=1), torch.cat([zeros, entropy], dim=1)
