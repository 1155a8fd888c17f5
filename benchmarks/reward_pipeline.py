"""Reward pipeline overhead: grading alone against grading plus every reward component (and
the hack detectors), over the 164 HumanEval canonical solutions, one run.

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

Prints JSON: seconds per pass (median over rounds), the overhead ratio
(grading + rewards) / grading (target <= 1.5; also from its parts, grading's median plus the
rewards' median, which the grading time's noise on a shared machine disturbs less), the
rewards' seconds per component, and the
audit events seen (none expected: canonical solutions attempt nothing).
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


def _tasks(limit: int):
    from training.rollout import TaskSpec  # noqa: PLC0415 (models: after django.setup)

    return [
        TaskSpec(
            task_version_id=index + 1,
            prompt=p["prompt"],
            entry_point=p["entry_point"],
            visible_tests="",
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


def _programs(tasks, tag: str) -> list[str]:
    return [t.prompt + t.reference_solution + f"\n# {tag}\n" for t in tasks]


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


def _rewards(tasks, programs, grades, references, timings: dict) -> tuple[list[dict], int]:
    """What a trainer step adds after grading; per-part seconds added to ``timings``."""
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
    flagged = sum(1 for s in submissions if detect(s))
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
    common.own_sandbox_workers(stack, "python", WORKERS)
    run_many(_requests(tasks[:WORKERS], _programs(tasks[:WORKERS], "warm")))  # every slot warm
    references, reference_seconds = _reference_profiles(tasks)
    grading, combined, rewards_only, cold = [], [], [], None
    timings: dict[str, float] = {}
    audit_events = failed = flagged = 0
    rows: list[dict] = []
    for round_ in range(options.rounds):
        programs = _programs(tasks, f"alone {round_}")
        started = time.perf_counter()
        grades = run_many(_requests(tasks, programs))
        grading.append(time.perf_counter() - started)

        programs = _programs(tasks, f"rewarded {round_}")
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
        # The same from its parts: less exposed to the grading time's noise on a shared machine.
        "overhead_ratio_from_parts": round(
            (grading_s + statistics.median(rewards_only or [cold["seconds"]])) / grading_s, 3
        ),
        "overhead_target": 1.5,
        "rewards_s_warm": round(statistics.median(rewards_only), 3) if rewards_only else None,
        "rewards_s_per_component_warm": {k: round(v / warm_rounds, 4) for k, v in timings.items()},
        "rewards_cold_first_round": cold,
        "reference_profiles_s": round(reference_seconds, 3),
        "component_means": {
            name: round(statistics.fmean(r[name] for r in rows), 4) for name in COMPONENTS
        },
        "hack_detectors": True,
        "flagged_submissions_last_round": flagged,
        "audit_events_seen": audit_events,
        "non_ok_grades": failed,
        "drift": _drift(rows),
    }


if __name__ == "__main__":
    main()
