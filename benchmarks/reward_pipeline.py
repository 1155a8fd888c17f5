"""Reward pipeline overhead: grading alone against grading plus every reward component (and
the hack detectors), over 164 HumanEval tasks' outputs of the kinds a policy writes, one run.

The outputs (``OUTPUT_KINDS``, one kind per task in turn, the same mix in every round): the
reference (passes), the reference with one mutation (``python_mutants``' first: wrong, it fails
some hidden test), a body that hard-codes the prompt's examples (``hard_coded_completion``: what a
policy gaming the suite writes; it fails the hidden tests and the hard-coding detector flags it)
and the bare stub (``pass``: fails). A task whose prompt cannot give a kind (no mutable
operation, no literal example) gets the reference instead, and the counts say so. So the
graders see failures, the reward components score partial and zero credit, and the detectors
run on programs they flag; the canonical solutions alone exercised none of that.

With one ``sandbox_worker --concurrency 2`` (this 2-core VM): each round grades the 164 programs
on their hidden tests through the queue (``run_many``), once alone and once followed by what a
trainer step adds per batch: ``GradedSubmission``s with the reference's profile, the reward
components ``correctness``, ``quality`` (one ruff run for the batch), ``efficiency`` and
``security`` (``training.rewards.registry.reward_components_batch``), and the hack detectors
(``probes_run`` then ``detect``). Each round's programs differ from the last round's (a trailing
comment), so no submission's figures are cached; the references' figures are cached after the
first round, as they are across a run's steps (the first round's rewards are reported apart as
``cold``). The reference profiles (3 gradings of each canonical solution, medians) are measured
once before, as ``reference_profiles_ensure`` does at a run's start, and reported apart.

Then ``training.drift.DriftMonitor``: its ``update`` per step fed with the step's
reward means and histogram, in microseconds per step and per reward value (a step's update
divided by the rewards it summarises).

Prints JSON: seconds per pass (median over rounds); ``overhead_ratio``, defined as the median
over rounds of (grading the outputs + their rewards and detectors) divided by the median over
rounds of grading the same outputs alone (target <= 1.5); the rewards' seconds per component;
per output kind, how many there were, passed and were flagged; the audit events seen (none
expected: no output probes the sandbox).
Run: ``.venv/bin/python benchmarks/reward_pipeline.py [--rounds 3] [--samples 164]``; ``--quick``
(the first 12 programs, 2 rounds: seconds) is what CI runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from sandboxes.process import Limits
from sandboxes.queue import python_tests, run_many
from training.rewards.base import GradedSubmission, ReferenceStats
from training.rewards.registry import reward_components_batch, weighted_total

# training.drift, training.hacks and training.rollout load Django's models, which load once
# common.private_var_dir has set Django up on the benchmark's own var dir (in main): their
# imports stand in the functions.

WORKERS = 2
COMPONENTS = ["correctness", "quality", "efficiency", "security"]


def _visible_tests(prompt: str, entry_point: str) -> str:
    """The prompt's examples as the task's visible tests (what the hard-coding detector compares
    a program's literals with), or ``""`` when it shows none."""
    from tasks_library.validation.examples import (  # noqa: PLC0415 (after setup)
        examples_test_source,
        python_prompt_examples,
    )

    examples = python_prompt_examples(prompt, entry_point)
    return examples_test_source(examples, entry_point, language="python") if examples else ""


def _tasks(limit: int):
    from training.rollout import TaskSpec  # noqa: PLC0415 (models: after django.setup)

    return [
        TaskSpec(
            task_version_id=index + 1,
            prompt=p["prompt"],
            entry_point=p["entry_point"],
            visible_tests=_visible_tests(p["prompt"], p["entry_point"]),
            hidden_tests=p["test"],
            timeout_s=10.0,
            reference_solution=p["canonical_solution"],
        )
        for index, p in enumerate(common.humaneval_rows(limit))
    ]


def _requests(tasks, programs):
    return [
        python_tests(
            program,
            t.hidden_tests,
            t.entry_point,
            prompt=t.prompt,
            limits=Limits(wall_timeout_s=t.timeout_s, cpu_s=int(t.timeout_s) + 1),
        )
        for t, program in zip(tasks, programs, strict=True)
    ]


OUTPUT_KINDS = ("reference", "one_mutation", "hard_coded_examples", "stub")


def _output(task, kind: str) -> tuple[str, str]:
    """``(kind it is, program)`` of one output of ``task``; the reference where the task's
    prompt cannot give ``kind``."""
    from tasks_library.exploitable import hard_coded_completion  # noqa: PLC0415 (after setup)
    from tasks_library.validation.mutants import python_mutants  # noqa: PLC0415 (after setup)

    reference = task.prompt + task.reference_solution
    if kind == "one_mutation":
        mutants = python_mutants(task.prompt, task.reference_solution, limit=1)
        return (kind, mutants[0].program) if mutants else ("reference", reference)
    if kind == "hard_coded_examples":
        try:
            return kind, task.prompt + hard_coded_completion(task.prompt, task.entry_point)
        except ValueError:
            return "reference", reference
    if kind == "stub":
        return kind, task.prompt + "    pass\n"
    return "reference", reference


def _outputs(tasks) -> list[tuple[str, str]]:
    """One output per task, the kinds of :data:`OUTPUT_KINDS` in turn."""
    return [_output(t, OUTPUT_KINDS[i % len(OUTPUT_KINDS)]) for i, t in enumerate(tasks)]


def _programs(outputs, tag: str) -> list[str]:
    """The outputs' programs, each round's own (a trailing comment: nothing is cached)."""
    return [program + f"\n# {tag}\n" for _kind, program in outputs]


def _reference_profiles(tasks, runs: int = 3) -> tuple[list, float]:
    started = time.perf_counter()
    results = run_many(
        _requests(
            [t for t in tasks for _ in range(runs)],
            [t.prompt + t.reference_solution for t in tasks for _ in range(runs)],
        )
    )
    seconds = time.perf_counter() - started
    stats = []
    for index in range(len(tasks)):
        group = results[index * runs : (index + 1) * runs]
        stats.append(
            ReferenceStats(
                wall_ms=statistics.median(r.wall_ms for r in group),
                cpu_ms=statistics.median(r.cpu_ms for r in group),
                peak_memory_bytes=int(statistics.median(r.peak_memory_bytes for r in group)),
            )
        )
    return stats, seconds


def _rewards(tasks, programs, grades, references, timings: dict) -> tuple[list[dict], list]:
    """What a trainer step adds after grading; per-part seconds added to ``timings``. Returns
    the reward rows and, per submission, whether a detector flagged it."""
    from training.hacks import detect, probes_run  # noqa: PLC0415 (models: after django.setup)

    submissions = [
        GradedSubmission(task=t, code=code, grade=grade, reference=reference)
        for t, code, grade, reference in zip(tasks, programs, grades, references, strict=True)
    ]
    rows = [{} for _ in submissions]
    for name in COMPONENTS:
        started = time.perf_counter()
        for row, values in zip(rows, reward_components_batch(submissions, [name]), strict=True):
            row.update(values)
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    probes_run(submissions)
    flagged = [bool(detect(s)) for s in submissions]
    timings["hack_detectors"] = timings.get("hack_detectors", 0.0) + time.perf_counter() - started
    return rows, flagged


def _drift(rows: list[dict], steps: int = 200) -> dict:
    from training.drift import DriftMonitor  # noqa: PLC0415 (models: after django.setup)
    from training.services import (  # noqa: PLC0415 (models: after django.setup, in main)
        REWARD_BINS,
        reward_histogram,
    )

    weights = {name: 1.0 for name in COMPONENTS}
    totals = [weighted_total(row, weights) for row in rows]
    means = {f"reward/{name}": statistics.fmean(row[name] for row in rows) for name in COMPONENTS}
    monitor = DriftMonitor()
    started = time.perf_counter()
    for step in range(1, steps + 1):
        shift = 0.001 * (step % 7)  # a little movement, no drift
        metrics = {
            "reward/mean": statistics.fmean(totals) + shift,
            **{k: v + shift for k, v in means.items()},
        }
        monitor.update(
            SimpleNamespace(
                step=step,
                reward_mean=metrics["reward/mean"],
                metrics=metrics,
                reward_histogram=reward_histogram(totals),
                reward_bins=list(REWARD_BINS),
            )
        )
    per_step_us = (time.perf_counter() - started) / steps * 1e6
    return {
        "steps": steps,
        "rewards_per_step": len(rows),
        "streams": len(means) + 1,
        "update_us_per_step": round(per_step_us, 2),
        "update_us_per_reward_value": round(per_step_us / len(rows), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=164, help="the first N HumanEval programs")
    options = common.parse_args(parser, {"rounds": 2, "samples": 12})
    with common.private_var_dir(migrate=False), Stack() as stack:
        out = measure(stack, options)
    print(json.dumps(out, indent=2))


def measure(stack, options) -> dict:
    tasks = _tasks(options.samples)
    outputs = _outputs(tasks)
    common.own_sandbox_workers(stack, "python", WORKERS)
    run_many(_requests(tasks[:WORKERS], _programs(outputs[:WORKERS], "warm")))  # every slot warm
    references, reference_seconds = _reference_profiles(tasks)
    grading, combined, rewards_only, cold = [], [], [], None
    timings: dict[str, float] = {}
    audit_events = failed = 0
    flagged: list[bool] = []
    rows: list[dict] = []
    for round_ in range(options.rounds):
        programs = _programs(outputs, f"alone {round_}")
        started = time.perf_counter()
        grades = run_many(_requests(tasks, programs))
        grading.append(time.perf_counter() - started)

        programs = _programs(outputs, f"rewarded {round_}")
        started = time.perf_counter()
        grades = run_many(_requests(tasks, programs))
        graded_at = time.perf_counter()
        round_timings: dict[str, float] = {}
        rows, flagged = _rewards(tasks, programs, grades, references, round_timings)
        finished = time.perf_counter()
        combined.append(finished - started)
        if round_ == 0:
            cold = {
                "seconds": round(finished - graded_at, 3),
                **{k: round(v, 3) for k, v in round_timings.items()},
            }
        else:
            rewards_only.append(finished - graded_at)
            for key, value in round_timings.items():
                timings[key] = timings.get(key, 0.0) + value
        audit_events += sum(g.audit_count for g in grades)
        failed += sum(1 for g in grades if g.status != "ok")
    warm_rounds = max(1, options.rounds - 1)
    grading_s, combined_s = statistics.median(grading), statistics.median(combined)
    return {
        "quick": options.quick,
        "samples": len(tasks),
        "workers": WORKERS,
        "rounds": options.rounds,
        "grading_alone_s": round(grading_s, 3),
        "grading_plus_rewards_s": round(combined_s, 3),
        "overhead_ratio": round(combined_s / grading_s, 3),
        "overhead_ratio_defined_as": "median (grading + rewards and detectors) / median grading "
        "alone, the same outputs, over the rounds",
        "grading_alone_s_each": [round(x, 3) for x in grading],
        "grading_plus_rewards_s_each": [round(x, 3) for x in combined],
        "overhead_target": 1.5,
        "rewards_s_warm": round(statistics.median(rewards_only), 3) if rewards_only else None,
        "rewards_s_per_component_warm": {k: round(v / warm_rounds, 4) for k, v in timings.items()},
        "rewards_cold_first_round": cold,
        "reference_profiles_s": round(reference_seconds, 3),
        "component_means": {
            name: round(statistics.fmean(r[name] for r in rows), 4) for name in COMPONENTS
        },
        "hack_detectors": True,
        "outputs": {
            kind: {
                "count": sum(1 for k, _p in outputs if k == kind),
                "passed_last_round": sum(
                    1 for (k, _p), g in zip(outputs, grades, strict=True) if k == kind and g.passed
                ),
                "flagged_last_round": sum(
                    1 for (k, _p), f in zip(outputs, flagged, strict=True) if k == kind and f
                ),
            }
            for kind in OUTPUT_KINDS
        },
        "flagged_submissions_last_round": sum(flagged),
        "audit_events_seen": audit_events,
        "non_ok_grades": failed,
        "drift": _drift(rows),
    }


if __name__ == "__main__":
    main()
