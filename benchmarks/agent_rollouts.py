"""Agent rollouts: multi-turn tool-using trajectories per minute and turns per second at 8, 32
and 128 concurrent trajectories, with the local policy, against TRL's ``GRPOTrainer`` rollouts.

Workload: the first ``--tasks`` HumanEval tasks as function-task environments
(training/agents/environment.py: ``bash``, ``file_editor``, ``run_tests``, ``submit`` in a
sandbox session per trajectory). The policy is the default local agent policy
(``training.agents.run.build_policy``: a small GPT-2 and its ChatML tokenizer) with Qwen2.5's
chat template (TRL parses tool calls only for templates it knows), warm-started for
``--sft-epochs`` on the tasks' scripted demonstrations and sampled at temperature 0.7 (the agent
scenario's settings), so that it makes real tool calls (view, insert, run the tests, submit) and
a few malformed ones, as a policy at the start of RL does. A weaker warm start measures
something else: with 30 epochs (SFT loss 0.17) most first turns were malformed, TRL's
trajectories ended there (one turn each) while Crucible's answered each malformed call and went
on to ``max_turns``: two workloads, not one.
Then, at each concurrency C of ``--concurrency``, one batch of C trajectories (C / 8 tasks x
groups of 8, tasks reused round-robin) is rolled out by
:func:`training.rollout.collect_rollouts`: the groups in two chunks that take turns, each
generating one batch while the other's tool calls run in their sessions on threads, final
workspaces graded in fresh sandboxes. Reported per concurrency: trajectories per minute and
turns per second (wall time from the first session's open to the last grade), tool calls per tool,
parse errors, the end reasons, generation vs tool time and the share of tool time hidden by
generation (1 - time the loop waited for tools / tools' own time).

Peer: TRL's ``GRPOTrainer`` (``environment_factory``: one environment object per rollout whose
methods are the tools, the same four backed by the same sandbox sessions) on the same policy,
tasks and turn budget. Its reward function grades every rollout's final workspace on the hidden
tests in fresh sandboxes, all queued at once (the batched form: TRL awaits an environment's own
``get_reward`` one environment after another), so that both sides do the same work from the
opening to the reward; its learning rate is negligible so that its optimizer step changes
nothing measured. Its rollout time is its generation (tool calls included) plus its reward
computation, timed around the trainer's own two methods, plus its environments' resets (the
session opens) where they ran outside those two: the same clock as Crucible's, which starts at its
first session's open. Token budgets: Crucible samples at most ``--max-new-tokens`` per turn
(256: the longest body's insert call fits); TRL's budget is
per trajectory (``max_turns x max_new_tokens``, less what the longest prompt leaves of the
context). Where this TRL cannot express the workload, ``trl.<level>.unavailable`` says why and
that level has no ratio (at 128: TRL has no context guard, see :func:`_why_unavailable`).

Run: ``.venv/bin/python benchmarks/agent_rollouts.py``; ``--quick`` (a one-layer policy warmed
for 150 epochs on two tasks, so that it calls tools on both sides; concurrency 2 and 4, two turns
of at most 64 tokens: about 25 s) is what CI runs.
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
}
CONCURRENCY = ((8, 32, 128), (2, 4))
GROUP = 8
BENCH_KIND = "function-trl-schemas"


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
    import torch  # noqa: PLC0415

    from training.agents import run as agent_run  # noqa: PLC0415 (after django.setup)
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
    policy = agent_run.build_policy(config, tasks, torch.device("cpu"))
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
            limits = replace(self.env.session_limits, idle_timeout_s=3000.0)
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
    """The peer's failure in words. An ``IndexError`` from the embedding lookup is TRL's missing
    context guard: its completion budget bounds the sampled tokens only, and the tool outputs
    appended between turns carry a trajectory past the policy's positions (measured at 128
    concurrent trajectories of 8 x 256 tokens: Crucible ended 3 of its 128 ``truncated``)."""
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, IndexError) and "index out of range in self" in str(exc):
        return (
            f"{what} (a trajectory with its tool outputs outgrew the policy's "
            f"{policy.n_positions} positions: TRL has no context guard)"
        )
    return what


TRL_PROMPT_MARGIN = 128  # tokens: TRL's tool schemas against Crucible's, same template


def _trl_completion_budget(policy, config, tasks) -> int:
    """TRL's completion budget, tokens: the per-trajectory sampled budget (``max_turns x
    max_new_tokens``), less what the longest prompt leaves of the policy's context. TRL has no
    context guard of its own: a completion past the context indexes the position embeddings out
    of range (measured: ``IndexError`` at 128 with 8 x 256 tokens); Crucible ends such a
    trajectory ``truncated``. The prompt is measured with Crucible's tool schemas; TRL writes its
    own from the environment's docstrings, so ``TRL_PROMPT_MARGIN`` tokens are kept spare."""
    from training.agents.environment import FunctionTaskEnvironment  # noqa: PLC0415

    longest = 0
    for task in tasks:
        opening = FunctionTaskEnvironment(task).opening()
        longest = max(longest, len(policy.chat.prompt_ids(opening.messages(), tools=opening.tools)))
    return min(
        config.max_turns * config.max_new_tokens, policy.n_positions - longest - TRL_PROMPT_MARGIN
    )


def trl(policy, config, tasks, concurrency: int) -> dict:
    """The peer: one ``GRPOTrainer`` step over ``concurrency`` rollouts (groups of 8) with an
    environment factory over the same sessions, the same policy and template; its rollout time
    is the time inside the trainer's generation (tool calls included), measured around it."""
    import tempfile  # noqa: PLC0415

    from datasets import Dataset  # noqa: PLC0415 (TRL and datasets load slowly)
    from trl import GRPOConfig, GRPOTrainer  # noqa: PLC0415

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
        args = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=concurrency,
            num_generations=group,
            max_steps=1,
            max_completion_length=_trl_completion_budget(policy, config, tasks),
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
            args=args,
            train_dataset=Dataset.from_list(rows),
            environment_factory=_trl_environment(tasks, calls, resets),
        )
        spent = {"generation": [], "rewards": []}
        windows: list = []  # (start, end) of every timed call

        def timed(name: str, inner):
            def call(*a, **k):
                started = time.monotonic()
                try:
                    return inner(*a, **k)
                finally:
                    spent[name].append(time.monotonic() - started)
                    windows.append((started, time.monotonic()))

            return call

        trainer._generate = timed("generation", trainer._generate)
        trainer._calculate_rewards = timed("rewards", trainer._calculate_rewards)
        # TRL prints its logs to stdout, where this script prints its JSON.
        with contextlib.redirect_stdout(sys.stderr):
            trainer.train()
    # The same clock as Crucible's, whose wall time runs from its first session's open: the
    # sessions TRL's resets opened outside the timed calls count too.
    opening_s = sum(
        end - start
        for start, end in resets
        if not any(w_start <= start and end <= w_end for w_start, w_end in windows)
    )
    wall = sum(spent["generation"]) + sum(spent["rewards"]) + opening_s
    trajectories = concurrency
    turns = len(calls) + trajectories  # every call came from a turn; each rollout ends with one
    tools: dict = {}
    for name, _seconds in calls:
        tools[name] = tools.get(name, 0) + 1
    return {
        "trajectories": trajectories,
        "turns_estimate": turns,
        "rollout_s": round(wall, 3),
        "trajectories_per_min": round(trajectories / wall * 60, 2) if wall else None,
        "turns_per_s": round(turns / wall, 3) if wall else None,
        "tool_calls": tools,
        "tool_calls_total": len(calls),
        "tool_s": round(sum(seconds for _name, seconds in calls), 3),
        "generation_s": round(sum(spent["generation"]), 3),
        "grading_s": round(sum(spent["rewards"]), 3),
        "session_open_s": round(opening_s, 3),
        "graded": len(graded),
        "passed": sum(r.tests_total > 0 and r.tests_passed == r.tests_total for r in graded),
    }


def measure(args) -> dict:
    from console.management.stack import Stack  # noqa: PLC0415 (after django.setup)

    concurrency = CONCURRENCY[1] if args.quick else CONCURRENCY[0]
    if args.concurrency:
        concurrency = tuple(int(c) for c in args.concurrency.split(","))
    tasks = _tasks(args.tasks)
    load_before = os.getloadavg()
    with Stack() as stack:
        common.own_sandbox_workers(stack, "python", args.workers)
        started = time.monotonic()
        policy, config, sft = _policy(args, tasks)
        warm_start_s = time.monotonic() - started
        crucible(policy, config, tasks, 2)  # warm-up (first sampling, first sessions): not measured
        ours, peer = {}, {}
        for level in concurrency:
            ours[str(level)] = crucible(policy, config, tasks, level)
            try:
                peer[str(level)] = trl(policy, config, tasks, level)
            except Exception as exc:  # noqa: BLE001 (the peer's failure is reported, not fatal)
                peer[str(level)] = {
                    "unavailable": _why_unavailable(exc, policy),
                    "trace": traceback.format_exc(limit=3)[-1500:],
                }
    ratios, turn_ratios = {}, {}
    for level, figures in ours.items():
        theirs = peer.get(level, {})  # a level TRL could not run holds "unavailable": no ratio
        if theirs.get("trajectories_per_min"):
            ratios[level] = round(
                figures["trajectories_per_min"] / theirs["trajectories_per_min"], 2
            )
        if theirs.get("turns_per_s"):
            turn_ratios[level] = round(figures["turns_per_s"] / theirs["turns_per_s"], 2)
    return {
        "quick": args.quick,
        "sizes": {name: getattr(args, name) for name in SIZES},
        "concurrency": list(concurrency),
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "warm_start": {
            "seconds": round(warm_start_s, 1),
            **{k: v for k, v in sft.items() if k != "sft/seconds"},
        },
        "crucible": ours,
        "trl": peer,
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
