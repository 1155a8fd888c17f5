"""Sharding: peak memory per rank and step time of the trainer's update under DDP and FSDP2.

A Qwen2-architecture model with random weights, its config built here (``--size 0.5b``: the
dimensions of Qwen2.5-0.5B, 494M parameters, vocabulary 151,936, tied embeddings; nothing is
downloaded), trains on ``--ranks`` ranks (torchrun, the trainer's launcher: gloo on CPUs, NCCL on
GPUs) in four settings: DDP and FSDP2, each without and with activation checkpointing. Each
setting runs in fresh processes through the trainer's own code: ``training.sharding.prepare``
(FSDP2 shards a copy of the model block by block and keeps a whole copy, in the compute dtype,
for rollouts), AdamW, then per step ``training.update.grpo_update`` on synthetic GRPO rollouts
(``--batch`` sequences of ``--seq-len`` tokens per rank, groups of 2 with differing rewards) and
``training.sharding.gather_weights`` (the rollouts' copy refreshed from the shards).

Per setting it reports, per rank:

- peak memory in bytes: the GPU's ``max_memory_allocated``; on CPUs the process's peak resident
  set (``VmHWM``), reset after the model is built (the whole model loaded before sharding is left
  out, everything training holds is in, Python's and torch's own ~0.45 GB too); glibc's mmap
  threshold is fixed at 64 KiB so that freed tensors leave the resident set;
- bytes per parameter of weights, gradients, optimizer state and the rollouts' copy;
- the median step time (the update) and weight-gather time, in seconds, over ``--steps`` steps
  after one warm-up step; trained tokens per second over all ranks;
- on a GPU, the model FLOPs utilisation: ``6 * parameters * tokens / seconds`` over
  ``--peak-tflops`` per GPU (the recomputation's FLOPs are not counted).

``ratio_peak_ddp_over_fsdp2`` compares the largest rank's peak of the two.

Run: ``.venv/bin/python benchmarks/sharding.py [--size 0.5b] [--ranks 2] [--steps 3]
[--seq-len 512] [--batch 2] [--device auto|cpu|cuda] [--peak-tflops 989]``. At 0.5B on CPUs
DDP needs about 16 bytes per parameter per rank (8 GB), its gradient buckets and the activations
of a 151,936-entry vocabulary: two ranks peaked at 10.7 GiB each with ``--seq-len 128 --batch 2``,
which a 24 GiB machine holds with nothing else running; 512 tokens need more. ``--quick`` (what
CI runs): a two-layer model 64 wide, 2 sequences of 32 tokens per rank, one measured step.
``--size 0.2b`` is what a smaller machine can measure (see ``SIZES``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common

ROOT = common.ROOT

SIZES = {
    # Qwen2.5-0.5B's dimensions (its config.json), random weights.
    "0.5b": {
        "vocab_size": 151_936,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
    },
    # Qwen2.5-0.5B's blocks (896 wide, MLP 4864, 14 heads, 2 key-value heads), 10 of them, over
    # a 32,768-entry vocabulary: 178M parameters, most of them in the blocks (which FSDP2 shards
    # block by block) as at real sizes; what a small shared machine can measure (two CPU ranks of
    # DDP hold about 6 GB of weights, gradients and AdamW state together).
    "0.2b": {
        "vocab_size": 32_768,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 10,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
    },
    "quick": {
        "vocab_size": 1024,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
}

SETTINGS = [("ddp", False), ("ddp", True), ("fsdp2", False), ("fsdp2", True)]


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--peak-tflops", type=float, default=0.0, help="a GPU's dense bf16 peak (H100/H200: 989)"
    )
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)  # "ddp:0" etc.
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    return common.parse_args(
        parser, {"size": "quick", "steps": 1, "seq_len": 32, "batch": 2, "device": "cpu"}
    )


# --- one setting, on every rank (under torchrun) -----------------------------------------------


def synthetic_rollouts(policy, *, batch: int, seq_len: int, seed: int) -> list:
    """``batch`` trajectories (groups of 2, rewards 0 and 1) of ``seq_len`` ids: half prompt, half
    one sampled turn."""
    import torch  # noqa: PLC0415

    from training.agents.trajectory import AgentTrajectory, AgentTurn  # noqa: PLC0415
    from training.rollout import Rollout, TaskSpec  # noqa: PLC0415

    gen = torch.Generator().manual_seed(seed)
    task = TaskSpec(
        task_version_id=1,
        prompt="",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=1,
    )
    top = policy.tokenizer.get_vocab_size()
    rollouts = []
    for index in range(batch):
        prompt = torch.randint(5, top, (seq_len // 2,), generator=gen).tolist()
        sampled = torch.randint(5, top, (seq_len - seq_len // 2,), generator=gen).tolist()
        reward = float(index % 2)
        turn = AgentTurn(0, sampled, [0.0] * len(sampled), "", True)
        rollouts.append(
            Rollout(
                task=task,
                group=index // 2,
                index_in_group=index % 2,
                trajectory=AgentTrajectory.of(prompt, [turn]),
                reward=reward,
                reward_components={"correctness": reward},
            )
        )
    return rollouts


def worker(args) -> None:
    """One setting on this rank; rank 0 writes every rank's figures to ``args.out``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django  # noqa: PLC0415

    django.setup()
    import torch  # noqa: PLC0415
    from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: PLC0415

    from training import distributed, sharding  # noqa: PLC0415
    from training.config import RunConfig  # noqa: PLC0415
    from training.policy import Policy, train_tokenizer  # noqa: PLC0415
    from training.update import grpo_update  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    mode, ac = args.worker.split(":")
    ranks = distributed.setup()
    if args.device == "cpu":
        ranks = distributed.Ranks(rank=ranks.rank, world=ranks.world, device=torch.device("cpu"))
    config = RunConfig(
        sharding=mode, activation_checkpointing=ac == "1", lr=1e-5, max_new_tokens=args.seq_len
    )
    tokenizer = train_tokenizer(["def f(x):\n    return x + 1\n"] * 4, vocab_size=300)
    torch.manual_seed(0)
    model_config = Qwen2Config(
        **SIZES[args.size],
        max_position_embeddings=max(4096, args.seq_len),
        tie_word_embeddings=True,
    )
    policy = Policy(
        model=Qwen2ForCausalLM(model_config).to(ranks.device),
        tokenizer=tokenizer,
        device=ranks.device,
    )
    settings = sharding.Sharding.from_config(config, ranks.device)
    model = sharding.prepare(policy, ranks, settings)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    sharding.reset_peak_memory(ranks.device)

    def synchronize() -> None:
        if ranks.device.type == "cuda":
            torch.cuda.synchronize(ranks.device)

    steps, gathers, tokens = [], [], 0
    for step in range(args.steps + 1):  # the first is the warm-up
        rollouts = synthetic_rollouts(
            policy, batch=args.batch, seq_len=args.seq_len, seed=1000 * ranks.rank + step
        )
        synchronize()
        started = time.perf_counter()
        metrics = grpo_update(policy, optimizer, rollouts, config, model=model)
        synchronize()
        middle = time.perf_counter()
        sharding.gather_weights(model, policy.model)
        synchronize()
        if step:
            steps.append(middle - started)
            gathers.append(time.perf_counter() - middle)
            tokens += args.batch * args.seq_len * ranks.world
        assert metrics["tokens/trained"] > 0
    report = sharding.memory_report(
        model, optimizer, ranks.device, sharding=settings, rollout=policy.model
    )
    step_s = statistics.median(distributed.gather_lists([statistics.median(steps)]))
    if ranks.is_main:
        trained_s = step_s * args.steps
        result = {
            "device": ranks.device.type,
            "memory": report,
            "step_s": step_s,
            "weight_gather_s": statistics.median(gathers),
            "tokens_per_s": tokens / trained_s,
            "mfu": (
                6
                * report["parameters"]
                * tokens
                / trained_s
                / (args.peak_tflops * 1e12)
                / ranks.world
                if args.peak_tflops and ranks.device.type == "cuda"
                else None
            ),
        }
        Path(args.out).write_text(json.dumps(result))
    del model, optimizer
    distributed.barrier()
    distributed.teardown()


# --- the settings, side by side ----------------------------------------------------------------


def run_setting(args, mode: str, ac: bool, directory: Path) -> dict:
    out = directory / f"{mode}-{int(ac)}.json"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={args.ranks}",
        str(Path(__file__).resolve()),
        f"--worker={mode}:{int(ac)}",
        f"--out={out}",
        f"--size={args.size}",
        f"--steps={args.steps}",
        f"--seq-len={args.seq_len}",
        f"--batch={args.batch}",
        f"--device={args.device}",
        f"--threads={args.threads}",
        f"--peak-tflops={args.peak_tflops}",
    ]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "PYTHONPATH": str(ROOT),
        # A fixed mmap threshold: every tensor of 64 KiB or more is its own mapping, returned to
        # the system when freed, so the resident set follows the live tensors (glibc's default
        # raises the threshold as large blocks are freed, then keeps freed heap as resident).
        "MALLOC_MMAP_THRESHOLD_": "65536",
    }
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode} ac={ac} failed:\n{done.stderr[-4000:]}")
    return json.loads(out.read_text())


def main() -> None:
    args = parse()
    if args.worker:
        worker(args)
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="crucible-sharding-") as directory:
        for mode, ac in SETTINGS:
            results[f"{mode}{'_ac' if ac else ''}"] = run_setting(args, mode, ac, Path(directory))
    peak = {name: r["memory"]["peak_bytes"] for name, r in results.items()}
    print(
        json.dumps(
            {
                "quick": args.quick,
                "size": args.size,
                "parameters": results["ddp"]["memory"]["parameters"],
                "ranks": args.ranks,
                "device": results["ddp"]["device"],
                "seq_len": args.seq_len,
                "batch_per_rank": args.batch,
                "settings": results,
                "peak_bytes": peak,
                "ratio_peak_ddp_over_fsdp2": peak["ddp"] / peak["fsdp2"],
                "ratio_step_s_fsdp2_over_ddp": results["fsdp2"]["step_s"]
                / results["ddp"]["step_s"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
