"""Agent rollouts: multi-turn tool-using trajectories per minute and turns per second at 8, 32
and 128 concurrent trajectories, with the local policy, against TRL's ``GRPOTrainer`` rollouts.

Workload: the first ``--tasks`` HumanEval tasks as function-task environments
(training/agents/environment.py: ``bash``, ``file_editor``, ``run_tests``, ``submit`` in a
sandbox session per trajectory). The policy is the default local agent policy (a small GPT-2
and its ChatML tokenizer, as ``training.agents.run.build_policy`` makes it) with
``--n-positions`` positions (8,192: room for ``max_turns`` turns of ``max_new_tokens`` with
their tool outputs after the prompt, so that neither side runs out of context) and Qwen2.5's
chat template (TRL parses tool calls only for templates it knows), warm-started for
``--sft-epochs`` on the tasks' scripted demonstrations and sampled at temperature 0.7 (the agent
scenario's settings), so that it makes real tool calls (view, insert, run the tests, submit) and
a few malformed ones, as a policy at the start of RL does. A weaker warm start measures
something else: with 30 epochs (SFT loss 0.17) most first turns were malformed, TRL's
trajectories ended there (one turn each) while Crucible's answered each malformed call and went
on to ``max_turns``: two workloads, not one.

Both sides' sessions take the same limits (:func:`_session_limits`: 80 MiB of files each, so
that 128 fit in a worker's disk budget). At each concurrency C of ``--concurrency``, one batch
of C trajectories (C / 8 tasks x groups of 8, tasks reused round-robin) is rolled out by
:func:`training.rollout.collect_rollouts`: the groups in two chunks that take turns, each
generating one batch while the other's tool calls run in their sessions on threads, final
workspaces graded in fresh sandboxes. Figures per run:
trajectories per minute and turns per second (wall time from the first session's open to the
last grade and the sessions closed), tool calls per tool, parse errors, the end reasons, where
the seconds went (``session_open_s``, ``generation_s``: sampling, ``tool_wait_s``: waiting for
tool calls that generation did not hide, ``grading_s``, ``other_s``: the rest) and the share of
tool time hidden by generation (1 - time the loop waited for tools / tools' own time).

Peer: TRL's ``GRPOTrainer`` (``environment_factory``: one environment object per rollout whose
methods are the tools, the same four backed by the same sandbox sessions) on the same policy,
tasks and turn budget. Its reward function grades every rollout's final workspace on the hidden
tests in fresh sandboxes, all queued at once (the batched form: TRL awaits an environment's own
``get_reward`` one environment after another), so that both sides do the same work from the
opening to the reward; its learning rate is negligible so that its optimizer step changes
nothing measured. Its rollout time is its generation (turns, tool calls and the environments'
resets, which open the sessions) plus its reward computation, timed around the trainer's own
two methods, plus any reset that ran outside them: the same clock as Crucible's. Its turns are
counted at its sampling (``_generate_single_turn``: one per row of every batch); its seconds
split into ``session_open_s``, ``generation_s`` (sampling), ``tool_s`` (TRL runs the calls one
after another between turns), ``grading_s`` and ``other_s``. Token budgets: each turn samples at
most ``--max-new-tokens`` on both sides (256: the longest body's insert call fits; TRL through
``generation_kwargs``); TRL's ``max_completion_length`` (sampled and tool tokens) is what the
longest prompt leaves of the context less one turn, and its context guard drops a tool result
that would overflow it, as Crucible ends such a trajectory ``truncated``. The JSON's ``peer``
names TRL's version and these settings.

Each side is warmed up first (one untimed batch of 2: first sampling, sessions, gradings, TRL's
first trainer); then at each level ``--repeats`` rounds, the side that goes first alternating
(:func:`benchmarks.common.alternating`), each figure's spread over the rounds
(:func:`benchmarks.common.spread`), the ratios from the medians. Where TRL fails at a level,
``trl.<level>.unavailable`` says why and that level has no ratio.

Run: ``.venv/bin/python benchmarks/agent_rollouts.py``; ``--quick`` (a one-layer policy warmed
for 150 epochs on two tasks, so that it calls tools on both sides; concurrency 2 and 4, two turns
of at most 64 tokens, 2 rounds) is what CI runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common

SIZES = {  # option: (full, quick)
    "tasks": (16, 2),
    "sft_epochs": (90, 150),
    "max_turns": (8, 2),
    "max_new_tokens": (256, 64),
    "n_layer": (2, 1),
    "n_embd": (128, 64),
    "n_positions": (8192, 2048),
    "repeats": (3, 2),
}
CONCURRENCY = ((8, 32, 128), (2, 4))
GROUP = 8
BENCH_KIND = "function-trl-schemas"
MIB = 1024 * 1024


def _session_limits():
    """Both sides' session limits: the function tasks' own with a smaller workspace (32 MiB),
    ``/tmp`` (32 MiB) and ``/dev/shm`` (16 MiB) than the defaults' 448 MiB in all, which a
    worker reserves from its disk budget (half the memory: 12.6 GB here) for every open session:
    at the defaults, 26 sessions at once fit, not 32 or 128 (a HumanEval workspace holds a few
    KB)."""
    from training.agents.environment import FunctionTaskEnvironment  # noqa: PLC0415

    return replace(
        FunctionTaskEnvironment.session_limits,
        workspace_bytes=32 * MIB,
        tmp_bytes=32 * MIB,
        shm_bytes=16 * MIB,
    )


def _register_aligned_environment(trl_environment_class) -> type:
    """A function-task environment whose tools' schemas are exactly those TRL derives from the
    peer's environment methods (``transformers.utils.get_json_schema``), so that both sides
    render the same prompt for the same policy; each call still runs Crucible's tool. Registered
    under :data:`BENCH_KIND` for ``environment_for``."""
    from transformers.utils import get_json_schema  # noqa: PLC0415

    from training.agents.environment import ENVIRONMENTS, FunctionTaskEnvironment  # noqa: PLC0415
    from training.agents.tools import Tool, coding_tools  # noqa: PLC0415

    class Aligned(Tool):
        def __init__(self, tool: Tool) -> None:
            self.tool = tool
            self.full = get_json_schema(getattr(trl_environment_class, tool.name))
            self.name = tool.name
            self.description = self.full["function"]["description"]
            self.parameters = self.full["function"]["parameters"]

        def schema(self) -> dict:
            return self.full

        def run(self, arguments, context):
            return self.tool.run({k: v for k, v in arguments.items() if v is not None}, context)

    class AlignedEnvironment(FunctionTaskEnvironment):
        kind = BENCH_KIND
        session_limits = _session_limits()

        def tools(self) -> list:
            return [Aligned(tool) for tool in coding_tools()]

    ENVIRONMENTS[BENCH_KIND] = AlignedEnvironment
    return AlignedEnvironment


def _tasks(count: int):
    from dataclasses import dataclass  # noqa: PLC0415

    from training.rollout import TaskSpec  # noqa: PLC0415 (after django.setup)

    @dataclass(frozen=True)
    class BenchTask(TaskSpec):
        kind: str = BENCH_KIND  # environment_for picks the environment with TRL's schemas

    return [
        BenchTask(
            task_version_id=index,
            prompt=row["prompt"],
            entry_point=row["entry_point"],
            visible_tests=row["test"],
            hidden_tests=row["test"],
            timeout_s=10.0,
            reference_solution=row["canonical_solution"],
        )
        for index, row in enumerate(common.humaneval_rows(count))
    ]


def _policy(args, tasks):
    """The default local agent policy (a GPT-2 and its ChatML tokenizer, as
    ``training.agents.run.build_policy`` makes it) with ``--n-positions`` positions, so that a
    trajectory of ``max_turns`` turns with its tool outputs fits on both sides, Qwen2.5's chat
    template, warm-started on the tasks' scripted demonstrations."""
    import torch  # noqa: PLC0415

    from training.agents.policy import build_agent_policy  # noqa: PLC0415 (after django.setup)
    from training.agents.run import corpus  # noqa: PLC0415
    from training.config import RunConfig  # noqa: PLC0415

    config = RunConfig(
        n_layer=args.n_layer,
        n_embd=args.n_embd,
        n_head=2,
        sft_epochs=args.sft_epochs,
        sft_batch_size=4,
        rollout_mode="agent",
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        temperature=0.7,
    )
    environment = _register_aligned_environment(_trl_environment(tasks, []))
    policy = build_agent_policy(
        corpus(tasks),
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_positions=args.n_positions,
        seed=config.seed,
        device=torch.device("cpu"),
    )
    # Qwen2.5's template (as TRL ships it) on both sides: TRL parses tool calls only for the
    # templates it knows; Crucible takes any.
    from trl.chat_template_utils import qwen2_5_chat_template  # noqa: PLC0415

    from training.agents.chat import ChatTemplate  # noqa: PLC0415
    from training.agents.demonstrations import (  # noqa: PLC0415
        render,
        scripted_function_demonstration,
    )
    from training.algorithms.sft import sft_settings, sft_train  # noqa: PLC0415

    policy.chat.tokenizer.chat_template = qwen2_5_chat_template
    policy.chat = ChatTemplate(policy.chat.tokenizer)
    examples = [
        render(policy.chat, scripted_function_demonstration(environment(task))) for task in tasks
    ]
    summary = sft_train(policy, examples, **sft_settings(config))
    return policy, config, summary


def crucible(policy, config, tasks, concurrency: int) -> dict:
    """One batch of ``concurrency`` agent trajectories; its figures."""
    import torch  # noqa: PLC0415

    from training.rollout import RolloutConfig, collect_rollouts  # noqa: PLC0415 (after django.setup)

    group = min(GROUP, concurrency)
    batch = [tasks[i % len(tasks)] for i in range(max(1, concurrency // group))]
    rollout_config = RolloutConfig.from_run_config(config)
    rollout_config.group_size = group
    rollout_config.tool_threads = min(32, concurrency)  # the default: threads past it queue
    started = time.monotonic()
    rollouts, stats = collect_rollouts(
        policy, batch, rollout_config, generator=torch.Generator().manual_seed(0)
    )
    wall = time.monotonic() - started
    turns = sum(len(r.turns) for r in rollouts)
    accounted = stats.session_open_s + stats.generation_s + stats.tool_wait_s + stats.grading_s
    return {
        "trajectories": len(rollouts),
        "turns": turns,
        "wall_s": round(wall, 3),
        "trajectories_per_min": round(len(rollouts) / wall * 60, 2),
        "turns_per_s": round(turns / wall, 3),
        "tool_calls": dict(stats.tool_calls),
        "tool_calls_total": sum(stats.tool_calls.values()),
        "parse_errors": stats.parse_errors,
        "end_reasons": dict(stats.end_reasons),
        "dropped": sum(r.dropped for r in rollouts),
        "passed": sum(r.passed for r in rollouts),
        "generation_s": round(stats.generation_s, 3),
        "generation_batches": stats.generation_batches,
        "tool_s": round(stats.tool_s, 3),
        "tool_wait_s": round(stats.tool_wait_s, 3),
        "session_open_s": round(stats.session_open_s, 3),
        "grading_s": round(stats.grading_s, 3),
        "tool_hidden_share": round(stats.tool_hidden_share, 3),
        # the rest of the wall time: rendering, parsing, observing, closing the sessions
        "other_s": round(wall - accounted, 3),
        "longest_tokens": max(len(r.trajectory.ids) for r in rollouts),
    }


def _trl_environment(tasks, calls: list, resets: list | None = None):
    """TRL's environment class: one per rollout, its methods the tools (TRL reads their schemas
    from the signatures and docstrings), each call run by Crucible's tool in a sandbox session.
    Each ``reset`` (closing the last session, opening the next) appends its ``(start, end)``
    monotonic times to ``resets``."""
    from sandboxes.sessions import open_session  # noqa: PLC0415 (after django.setup)
    from training.agents.environment import FunctionTaskEnvironment  # noqa: PLC0415
    from training.agents.parsers import ToolCall  # noqa: PLC0415
    from training.agents.tools import run_call  # noqa: PLC0415

    class SessionEnvironment:
        def __init__(self) -> None:
            self.env = None

        def reset(self, task_index: str = "0", **_row) -> None:
            started = time.monotonic()
            self._reset(task_index)
            if resets is not None:
                resets.append((started, time.monotonic()))

        def _reset(self, task_index: str) -> None:
            if self.env is not None:
                self.env.close()
            self.env = FunctionTaskEnvironment(tasks[int(task_index)])
            # TRL steps every rollout of its batch in lockstep, and grades after the last turn of
            # all: a session waits while the whole batch generates, past the 300 s idle timeout
            # that Crucible's own rollouts never come near (level 128 hit it on this machine).
            limits = replace(_session_limits(), idle_timeout_s=3000.0)
            self.env.open(open_session(self.env.workspace(), limits=limits))

        def _call(self, name: str, **arguments) -> str:
            started = time.monotonic()
            arguments = {k: v for k, v in arguments.items() if v is not None}
            record, _result = run_call(
                self.env._tools, ToolCall("call_0", name, arguments), self.env.context
            )
            calls.append((name, time.monotonic() - started))
            return record.output

        def bash(self, command: str, timeout: int | None = None) -> str:
            """Run a bash command in the workspace and see its exit code and output.

            Args:
                command: The command.
                timeout: Seconds before the command is killed (capped).
            """
            return self._call("bash", command=command, timeout=timeout)

        def file_editor(
            self,
            command: str,
            path: str,
            file_text: str | None = None,
            old_str: str | None = None,
            new_str: str | None = None,
            insert_line: int | None = None,
        ) -> str:
            """View and edit files of the workspace: view, create, str_replace, insert, undo_edit.

            Args:
                command: view, create, str_replace, insert or undo_edit.
                path: Relative to the workspace.
                file_text: The new file's text (create).
                old_str: The text to replace, occurring once (str_replace).
                new_str: The replacement (str_replace) or the lines to insert (insert).
                insert_line: Insert after this line; 0 for the top (insert).
            """
            return self._call(
                "file_editor",
                command=command,
                path=path,
                file_text=file_text,
                old_str=old_str,
                new_str=new_str,
                insert_line=insert_line,
            )

        def _grading_request(self) -> dict:
            """The hidden-test grading of the final workspace, as Crucible queues it (private: TRL
            offers every public method to the model as a tool)."""
            return self.env.grading_request(self.env.final_files())

        def run_tests(self) -> str:
            """Run the task's visible tests on the workspace as it is now."""
            return self._call("run_tests")

        def submit(self) -> str:
            """Submit the workspace as it is now as your answer."""
            return self._call("submit")

    return SessionEnvironment


def _why_unavailable(exc: Exception, policy) -> str:
    """The peer's failure in words; an ``IndexError`` from the embedding lookup names the
    policy's positions (a turn sampled past them)."""
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, IndexError) and "index out of range in self" in str(exc):
        return f"{what} (a sequence outgrew the policy's {policy.n_positions} positions)"
    return what


TRL_PROMPT_MARGIN = 128  # tokens: TRL's tool schemas against Crucible's, same template


def _trl_completion_budget(policy, config, tasks) -> int:
    """TRL's completion budget (``max_completion_length``), tokens: what the longest prompt
    leaves of the policy's context, less one turn. TRL counts the tool outputs in it, as
    Crucible counts them against the context: before each turn TRL drops the tool results that
    would carry a completion past it (its context guard), and each turn samples at most
    ``max_new_tokens`` (``generation_kwargs``), so that no sequence outgrows the positions. The
    prompt is measured with Crucible's tool schemas; TRL writes its own from the environment's
    docstrings, so ``TRL_PROMPT_MARGIN`` tokens are kept spare."""
    from training.agents.environment import FunctionTaskEnvironment  # noqa: PLC0415

    longest = 0
    for task in tasks:
        opening = FunctionTaskEnvironment(task).opening()
        longest = max(longest, len(policy.chat.prompt_ids(opening.messages(), tools=opening.tools)))
    return policy.n_positions - longest - TRL_PROMPT_MARGIN - config.max_new_tokens


def _trl_args(policy, config, tasks, concurrency: int, out: str):
    """The peer's settings: its ``GRPOConfig`` for one step of ``concurrency`` rollouts."""
    from trl import GRPOConfig  # noqa: PLC0415

    return GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=concurrency,
        num_generations=min(GROUP, concurrency),
        max_steps=1,
        max_completion_length=_trl_completion_budget(policy, config, tasks),
        # one turn samples at most max_new_tokens, as Crucible's (TRL's default: the whole
        # completion budget per turn, which a turn that never stops would spend)
        generation_kwargs={"max_new_tokens": config.max_new_tokens},
        max_tool_calling_iterations=config.max_turns,
        temperature=config.temperature,
        learning_rate=1e-12,
        beta=0.0,
        # TRL turns gradient checkpointing on by default, and generation in train mode with it
        # samples from a broken model here (greedy decoding of the same prompt: a clean view
        # call without it, '{"name": " " "insert", "arguments": "solution.arguments"...' with
        # it; huggingface/transformers#36051): its trajectories then end at their first,
        # unparseable turn. A TRL user would turn it off, as here (the model is small).
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        dataloader_num_workers=0,
        seed=0,
    )


def trl(policy, config, tasks, concurrency: int) -> dict:
    """The peer: one ``GRPOTrainer`` step over ``concurrency`` rollouts (groups of 8) with an
    environment factory over the same sessions, the same policy and template. Its rollout time
    is the time inside the trainer's generation (turns, tool calls and resets) and reward
    computation, measured around them, plus the resets that ran outside them. Its sessions are
    closed after the step, untimed (Crucible closes its own inside its clock)."""
    import tempfile  # noqa: PLC0415

    from datasets import Dataset  # noqa: PLC0415 (TRL and datasets load slowly)
    from trl import GRPOTrainer  # noqa: PLC0415

    from sandboxes.queue import run_many  # noqa: PLC0415
    from training.agents.environment import FunctionTaskEnvironment  # noqa: PLC0415

    group = min(GROUP, concurrency)
    rows = []
    for index in range(max(1, concurrency // group)):
        task = index % len(tasks)
        opening = FunctionTaskEnvironment(tasks[task]).opening()
        rows.append({"prompt": opening.messages(), "task_index": str(task)})
    calls: list = []
    resets: list = []
    with tempfile.TemporaryDirectory(prefix="trl-agent-") as out:
        graded: list = []

        def hidden_tests(completions, environments, **_kwargs) -> list[float]:
            """Every rollout's final workspace graded in a fresh sandbox, queued at once."""
            results = run_many([e._grading_request() for e in environments])
            graded.extend(results)
            return [r.tests_passed / r.tests_total if r.tests_total else 0.0 for r in results]

        trainer = GRPOTrainer(
            model=policy.model,
            processing_class=policy.chat.tokenizer,
            reward_funcs=[hidden_tests],
            args=_trl_args(policy, config, tasks, concurrency, out),
            train_dataset=Dataset.from_list(rows),
            environment_factory=_trl_environment(tasks, calls, resets),
        )
        spent = {"generation": [], "rewards": [], "turns": []}
        windows: list = []  # (start, end) of every timed call
        sampled = {"turns": 0}

        def timed(name: str, inner, window: bool = True):
            def call(*a, **k):
                started = time.monotonic()
                try:
                    return inner(*a, **k)
                finally:
                    spent[name].append(time.monotonic() - started)
                    if window:
                        windows.append((started, time.monotonic()))

            return call

        def turns(inner):
            def call(*a, **k):
                completion_ids, logprobs = inner(*a, **k)
                sampled["turns"] += len(completion_ids)  # one turn per row of every batch
                return completion_ids, logprobs

            return call

        trainer._generate = timed("generation", trainer._generate)
        trainer._calculate_rewards = timed("rewards", trainer._calculate_rewards)
        trainer._generate_single_turn = timed(
            "turns", turns(trainer._generate_single_turn), window=False
        )
        try:
            # TRL prints its logs to stdout, where this script prints its JSON.
            with contextlib.redirect_stdout(sys.stderr):
                trainer.train()
        finally:
            for environments in trainer._environment_pool.values():
                for environment in environments:
                    if environment.env is not None:
                        environment.env.close()
    # The same clock as Crucible's, whose wall time runs from its first session's open: the
    # sessions TRL's resets opened outside the timed calls count too.
    opening_s = sum(end - start for start, end in resets)
    outside_s = sum(
        end - start
        for start, end in resets
        if not any(w_start <= start and end <= w_end for w_start, w_end in windows)
    )
    wall = sum(spent["generation"]) + sum(spent["rewards"]) + outside_s
    trajectories = concurrency
    turns_total = sampled["turns"]
    tools: dict = {}
    for name, _seconds in calls:
        tools[name] = tools.get(name, 0) + 1
    tool_s = sum(seconds for _name, seconds in calls)
    accounted = opening_s + sum(spent["turns"]) + tool_s + sum(spent["rewards"])
    return {
        "trajectories": trajectories,
        "turns": turns_total,
        "wall_s": round(wall, 3),
        "trajectories_per_min": round(trajectories / wall * 60, 2),
        "turns_per_s": round(turns_total / wall, 3),
        "tool_calls": tools,
        "tool_calls_total": len(calls),
        "generation_s": round(sum(spent["turns"]), 3),
        "generation_batches": len(spent["turns"]),
        "tool_s": round(tool_s, 3),
        "session_open_s": round(opening_s, 3),
        "grading_s": round(sum(spent["rewards"]), 3),
        # the rest: tokenizing, parsing, the tool results' suffixes, the trainer's bookkeeping
        "other_s": round(wall - accounted, 3),
        "graded": len(graded),
        "passed": sum(r.tests_total > 0 and r.tests_passed == r.tests_total for r in graded),
    }


def _summary(runs: list[dict]) -> dict:
    """One side's runs at one level: each number's spread over the runs
    (:func:`benchmarks.common.spread`), each count per name summed over them, and the runs."""
    out: dict = {}
    for key, value in runs[0].items():
        if isinstance(value, (int, float)):
            out[key] = common.spread([run[key] for run in runs], digits=3)
        elif isinstance(value, dict):
            total: dict = {}
            for run in runs:
                for name, count in run[key].items():
                    total[name] = total.get(name, 0) + count
            out[key] = dict(sorted(total.items()))
    out["runs"] = runs
    return out


def _peer_settings(policy, config, tasks) -> dict:
    import trl as trl_package  # noqa: PLC0415

    args = _trl_args(policy, config, tasks, GROUP, "/tmp/unused")
    return {
        "name": "trl.GRPOTrainer (environment_factory)",
        "version": trl_package.__version__,
        "max_completion_length": args.max_completion_length,
        "generation_kwargs": args.generation_kwargs,
        "max_tool_calling_iterations": args.max_tool_calling_iterations,
        "num_generations": args.num_generations,
        "temperature": args.temperature,
        "gradient_checkpointing": args.gradient_checkpointing,
        "use_vllm": args.use_vllm,
    }


def measure(args) -> dict:
    from console.management.stack import Stack  # noqa: PLC0415 (after django.setup)

    concurrency = CONCURRENCY[1] if args.quick else CONCURRENCY[0]
    if args.concurrency:
        concurrency = tuple(int(c) for c in args.concurrency.split(","))
    tasks = _tasks(args.tasks)
    load_before = os.getloadavg()
    sides = {"crucible": crucible, "trl": trl}
    with Stack() as stack:
        common.own_sandbox_workers(stack, "python", args.workers)
        started = time.monotonic()
        policy, config, sft = _policy(args, tasks)
        warm_start_s = time.monotonic() - started
        # Warm-up, not measured: each side's first sampling, sessions, gradings (and TRL's
        # first trainer).
        crucible(policy, config, tasks, 2)
        trl(policy, config, tasks, 2)
        runs: dict = {side: {str(level): [] for level in concurrency} for side in sides}
        failed: dict = {}
        started = time.monotonic()
        for level in concurrency:
            for round_index in range(args.repeats):
                for side in common.alternating(round_index, list(sides)):
                    if (side, level) in failed:
                        continue
                    try:
                        runs[side][str(level)].append(sides[side](policy, config, tasks, level))
                    except Exception as exc:  # a peer's failure is reported
                        if side == "crucible":
                            raise
                        failed[side, level] = {
                            "unavailable": _why_unavailable(exc, policy),
                            "trace": traceback.format_exc(limit=3)[-1500:],
                        }
        measured_s = time.monotonic() - started
    report_sides: dict = {}
    for side, levels in runs.items():
        report_sides[side] = {
            level: failed.get((side, int(level))) or _summary(level_runs)
            for level, level_runs in levels.items()
        }
    ratios, turn_ratios = {}, {}
    for level, ours in report_sides["crucible"].items():
        theirs = report_sides["trl"][level]  # a level TRL could not run: no ratio
        if "unavailable" in theirs:
            continue
        ratios[level] = round(
            ours["trajectories_per_min"]["median"] / theirs["trajectories_per_min"]["median"], 2
        )
        turn_ratios[level] = round(
            ours["turns_per_s"]["median"] / theirs["turns_per_s"]["median"], 2
        )
    return {
        "quick": args.quick,
        "sizes": {name: getattr(args, name) for name in SIZES},
        "concurrency": list(concurrency),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "measured_s": round(measured_s, 1),
        "warm_start": {
            "seconds": round(warm_start_s, 1),
            **{k: v for k, v in sft.items() if k != "sft/seconds"},
        },
        "peer": _peer_settings(policy, config, tasks),
        "crucible": report_sides["crucible"],
        "trl": report_sides["trl"],
        # medians over the rounds
        "ratio_trajectories_per_min_crucible_over_trl": ratios,
        # TRL ends a trajectory at its first turn without a tool call; Crucible answers it and
        # goes on to max_turns: its trajectories are longer, so turns per second compare the work.
        "ratio_turns_per_s_crucible_over_trl": turn_ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, (full, _quick) in SIZES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=full)
    parser.add_argument(
        "--concurrency", default="", help="comma-separated levels (default 8,32,128)"
    )
    parser.add_argument("--workers", type=int, default=2, help="sandbox worker slots")
    args = common.parse_args(parser, {name: quick for name, (_full, quick) in SIZES.items()})
    with common.private_var_dir(migrate=False):
        report = measure(args)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
