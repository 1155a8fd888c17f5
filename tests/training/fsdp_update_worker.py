"""Run by the FSDP2 tests under torchrun (1 or 2 ranks): GRPO updates of a tiny Qwen2 policy.

Every rank builds the same tiny Qwen2-architecture policy (config built here, random weights,
seeded) and the same global batch of 4 groups of 3 synthetic trajectories per step (the DDP
worker's, with a step-dependent seed), takes its share of the groups and runs
:func:`training.update.grpo_update` through the module :func:`training.sharding.prepare` gives
(FSDP2-sharded on two ranks; the plain model on one).

    worker.py OUT SHARDING AC OPTIMIZER STEPS [--save-at K --ckpt CKPT] [--resume-from CKPT]
        [--precision fp32|bf16]

Rank 0 writes ``OUT`` (torch): ``{"initial" and "params": full float32 weights before the first
and after the last step, "rollout_params": the rollouts' copy after the last step, "metrics":
each step's metrics, "saved": the full weights and optimizer state at the checkpoint (written
into ``CKPT/sharded`` after step K), "loaded": the same just after a resume, "memory": the
memory report}``.
"""

import argparse
import os
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup()

import torch  # noqa: E402
from torch.distributed.checkpoint.state_dict import (  # noqa: E402
    StateDictOptions,
    get_state_dict,
)
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from tests.training.ddp_update_worker import global_batch  # noqa: E402
from training import checkpoint, distributed, sharding  # noqa: E402
from training.config import RunConfig  # noqa: E402
from training.policy import Policy, train_tokenizer  # noqa: E402
from training.update import grpo_update  # noqa: E402


def tiny_qwen2_policy(device: torch.device) -> Policy:
    """Two Qwen2 decoder layers (grouped-query attention, tied embeddings), 300 ids, seeded."""
    tokenizer = train_tokenizer(["def f(x):\n    return x + 1\n"] * 8, vocab_size=300)
    torch.manual_seed(5)
    config = Qwen2Config(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    return Policy(model=Qwen2ForCausalLM(config).to(device), tokenizer=tokenizer, device=device)


def copies(state: dict) -> dict:
    """``state`` with every tensor cloned (a plain model's state dict holds its live tensors)."""
    return {k: v.clone() for k, v in state.items()}


def full_state(model, optimizer) -> dict:
    """Whole float32 weights and optimizer state (keyed by parameter name), on every rank."""
    weights, optim = get_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True)
    )
    return {
        "weights": {k: v.detach().clone() for k, v in weights.items()},
        "optimizer": {
            name: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in slots.items()}
            for name, slots in optim["state"].items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("sharding", choices=["ddp", "fsdp2"])
    parser.add_argument("ac", type=int)
    parser.add_argument("optimizer", choices=["sgd", "adamw"])
    parser.add_argument("steps", type=int)
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--ckpt", default="")
    parser.add_argument("--resume-from", default="")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()

    ranks = distributed.setup()
    config = RunConfig(
        loss_aggregation="seq-mean-token-mean",
        kl_coef=0.1,
        clip_high=0.28,
        ppo_epochs=2,
        lr=0.5 if args.optimizer == "sgd" else 1e-3,
        sharding=args.sharding,
        mixed_precision=args.precision,
        activation_checkpointing=bool(args.ac),
    )
    policy = tiny_qwen2_policy(ranks.device)
    reference = tiny_qwen2_policy(ranks.device).model
    reference.eval()
    settings = sharding.Sharding.from_config(config, ranks.device)
    model = sharding.prepare(policy, ranks, settings)
    if args.optimizer == "sgd":
        # SGD: the parameters move by the reduced gradient itself (Adam divides by the gradient's
        # own magnitude, which turns float-rounding noise on near-zero entries into full steps).
        optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    out: dict = {"metrics": [], "initial": copies(sharding.full_state_dict(model))}
    first = 1
    if args.resume_from:
        checkpoint.read_sharded(Path(args.resume_from), model=model, optimizer=optimizer)
        sharding.gather_weights(model, policy.model)
        out["loaded"] = full_state(model, optimizer)
        first = args.save_at + 1
    mine = ranks.shard(4)
    for step in range(first, args.steps + 1):
        rollouts = global_batch(policy, config, seed=100 + step)  # each step's batch differs
        local = [r for r in rollouts if r.group in mine]
        out["metrics"].append(
            grpo_update(policy, optimizer, local, config, model=model, reference=reference)
        )
        sharding.gather_weights(model, policy.model)
        if step == args.save_at and args.ckpt:
            if ranks.is_main:
                os.makedirs(args.ckpt, exist_ok=True)
            distributed.barrier()
            checkpoint.write_sharded(Path(args.ckpt), model=model, optimizer=optimizer)
            out["saved"] = full_state(model, optimizer)
    out["params"] = copies(sharding.full_state_dict(model))
    out["master_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
    out["rollout_params"] = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    out["memory"] = sharding.memory_report(
        model, optimizer, ranks.device, sharding=settings, rollout=policy.model
    )
    if ranks.is_main:
        torch.save(out, args.out)
    del model, optimizer
    distributed.barrier()
    distributed.teardown()


if __name__ == "__main__":
    main()
