"""The ``efficiency`` reward component: the submission's time and memory on the hidden tests
against the reference solution's, measured in the same sandbox.

Inputs (all from the grading execution, :class:`~sandboxes.result.ExecutionResult`):
``cpu_ms`` (user + system CPU milliseconds of the submission's process tree: less disturbed
by other load than wall time; ``wall_ms`` stands in where no CPU time was measured) and
``peak_memory_bytes`` (the tree's peak above the sandbox's resident baseline with a cgroup,
the largest resident set otherwise), and the reference's :class:`ReferenceStats` (medians of
3 runs, :func:`training.rewards.reference.reference_profiles_ensure`).

Score, in [0, 1]::

    T = min(1, (ref_ms + 5) / (sub_ms + 5))                  time, ms (5 ms noise floor)
    M = min(1, (ref_bytes + 4 MiB) / (sub_bytes + 4 MiB))    memory (4 MiB noise floor)
    G = min(1, 2 ** -max(0, k_sub - k_ref - 0.2))            growth exponents, when both known
    efficiency = T**0.7 * M**0.3            or, with G:   T**0.5 * M**0.2 * G**0.3

As fast and as small as the reference (or better) scores 1.0; twice the reference's time above
the floor about 0.6 (T = 0.5); each extra unit of growth exponent beyond a 0.2 tolerance for
the fit's noise halves G (a quadratic answer to a linear problem: G ~= 0.57). The floors keep a
HumanEval-sized run (a few milliseconds, about 2 MiB, mostly the harness) from turning
scheduler noise into reward. A grade that is not ``ok`` (failed, timeout, crashed...) scores 0:
the cost of a wrong answer is not worth rewarding. No reference profile: 0.5, neutral.

Growth exponents: a task whose workspace files hold :data:`SIZES_FILE`
(``{"sizes": [n1, n2, ...], "args": "lambda n: (...)"}``: the sizes and a Python expression
giving ``entry_point``'s arguments for size ``n``) can be timed at each size
(:func:`growth_requests`, :func:`growth_from_results`); :func:`growth_exponent` fits the slope of
log time against log size. The reference's exponent is stored in its profile; a
submission's goes in ``GradedSubmission.extra["growth_exponent"]`` where the caller measured it
(:func:`measure_growth_many`).
"""

from __future__ import annotations

import json
import math

from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import python_tests, run_many
from training.rewards.base import GradedSubmission, ReferenceStats
from training.rewards.registry import reward

TIME_FLOOR_MS = 5.0
MEMORY_FLOOR_BYTES = 4 * 1024**2
GROWTH_TOLERANCE = 0.2
NEUTRAL = 0.5
SIZES_FILE = "crucible_sizes.json"
MIN_TIME_MS = 0.001  # a size's time is at least this (the log of 0 is undefined)


def growth_exponent(sizes, times) -> float:
    """The exponent ``k`` of ``time ~ c * size**k``: the least-squares slope of ``log(time)``
    against ``log(size)``.

    Args:
        sizes: input sizes (> 0), at least two distinct.
        times: the time at each size (> 0; any unit).

    Raises:
        ValueError: fewer than two points, lengths differ, a size or time <= 0, or all
            sizes equal.
    """
    sizes, times = list(sizes), list(times)
    if len(sizes) != len(times) or len(sizes) < 2:
        raise ValueError("growth_exponent needs as many times as sizes, at least two")
    if any(s <= 0 for s in sizes) or any(t <= 0 for t in times):
        raise ValueError("sizes and times must be > 0")
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        raise ValueError("growth_exponent needs at least two distinct sizes")
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def _ratio(reference: float, submission: float, floor: float) -> float:
    return min(1.0, (max(0.0, reference) + floor) / (max(0.0, submission) + floor))


def time_ms(result: R.ExecutionResult | ReferenceStats) -> float:
    """The time an execution or a profile is judged by: CPU milliseconds, wall where none."""
    return result.cpu_ms if result.cpu_ms > 0 else result.wall_ms


def efficiency_score(
    grade: R.ExecutionResult, reference: ReferenceStats | None, growth: float | None = None
) -> float:
    """The efficiency score of one grading result (formula in the module's docstring).

    Args:
        grade: the submission's hidden-test result.
        reference: the reference's profile; None scores :data:`NEUTRAL`.
        growth: the submission's fitted growth exponent, if measured.
    """
    if grade.status != R.OK:
        return 0.0
    if reference is None:
        return NEUTRAL
    t = _ratio(time_ms(reference), time_ms(grade), TIME_FLOOR_MS)
    m = _ratio(reference.peak_memory_bytes, grade.peak_memory_bytes, MEMORY_FLOOR_BYTES)
    if growth is None or reference.growth_exponent is None:
        return t**0.7 * m**0.3
    g = min(1.0, 2.0 ** -max(0.0, growth - reference.growth_exponent - GROWTH_TOLERANCE))
    return t**0.5 * m**0.2 * g**0.3


@reward("efficiency", gated=True)  # times correctness: see training/rewards/registry.py
def efficiency(submission: GradedSubmission) -> float:
    """Time (CPU ms) and peak memory on the hidden tests against the reference's profile, and
    the growth exponent where both are known: 1.0 as efficient as the reference, 0 for a grade
    that is not ``ok``, 0.5 without a reference profile (formula in the module's docstring)."""
    return efficiency_score(
        submission.grade, submission.reference, submission.extra.get("growth_exponent")
    )


# --- Timing a program at growing input sizes ------------------------------------------------


def sizes_spec(task) -> dict | None:
    """The task's growth spec (``{"sizes": [...], "args": "lambda n: ..."}``) from its workspace
    file :data:`SIZES_FILE`, or None (no file, a non-Python harness, or a spec that does not
    read)."""
    files = getattr(task, "files", None) or {}
    text = files.get(SIZES_FILE)
    harness = getattr(task, "harness", None) or getattr(
        getattr(task, "test_suite", None), "harness", "python-check"
    )
    if not text or harness != "python-check":
        return None
    try:
        spec = json.loads(text)
        sizes = [int(n) for n in spec["sizes"]]
        args = str(spec["args"])
    except (ValueError, KeyError, TypeError):
        return None
    if len(set(sizes)) < 2 or min(sizes) <= 0:
        return None
    return {"sizes": sizes, "args": args}


def _timing_tests(args: str, size: int) -> str:
    """A ``check`` whose one test calls the candidate once at ``size``; the arguments are made
    on the tests' side."""
    return (
        f"def check(candidate):\n    _args = ({args})({size})\n"
        "    assert candidate(*_args) is not None or True\n"
    )


def growth_requests(task, program: str, *, runs: int = 3) -> list[dict]:
    """Queue requests timing ``program`` at each size of the task's spec, ``runs`` times each,
    in rounds: every size once (in the spec's order), then every size again. Rounds spread each
    size's runs over the batch, so a burst of load on the machine slows one run of a size rather
    than all of them (the least over the runs is kept). Empty without a spec."""
    spec = sizes_spec(task)
    if spec is None:
        return []
    suite = getattr(task, "test_suite", None)
    timeout = float(getattr(task, "timeout_s", None) or getattr(suite, "timeout_s", None) or 10.0)
    limits = Limits(wall_timeout_s=timeout, cpu_s=int(timeout) + 1)
    files = dict(getattr(task, "files", None) or {})
    return [
        python_tests(
            program,
            _timing_tests(spec["args"], size),
            task.entry_point,
            prompt=task.prompt,
            limits=limits,
            files=files,
        )
        for _ in range(runs)
        for size in spec["sizes"]
    ]


def growth_from_results(
    task, results: list[R.ExecutionResult], *, runs: int = 3
) -> tuple[float | None, dict]:
    """The growth exponent from the results of :func:`growth_requests` (same order), and the
    timings behind it: per size, the least over its runs of the CPU milliseconds spent inside
    the call (``ExecutionResult.call_cpu_ms``: measured in the sandbox around the call alone,
    so loading and the harness are left out; the least, since interference only ever adds).
    None when any timed run did not pass (a failing program has no meaningful growth)."""
    spec = sizes_spec(task)
    if spec is None or len(results) != runs * len(spec["sizes"]):
        return None, {}
    if any(r.status != R.OK for r in results):
        return None, {"statuses": [r.status for r in results]}
    count = len(spec["sizes"])
    times = [max(MIN_TIME_MS, min(r.call_cpu_ms for r in results[j::count])) for j in range(count)]
    return growth_exponent(spec["sizes"], times), {
        "sizes": spec["sizes"],
        "ms": [round(t, 3) for t in times],
    }


def measure_growth_many(items: list[tuple[object, str]], *, runs: int = 3) -> list[float | None]:
    """The growth exponent of each ``(task, program)`` (None where the task has no spec or the
    program failed a timed run), every timing run queued at once."""
    plans = [growth_requests(task, program, runs=runs) for task, program in items]
    flat = run_many([r for plan in plans for r in plan])
    out, at = [], 0
    for (task, _program), plan in zip(items, plans):
        out.append(
            growth_from_results(task, flat[at : at + len(plan)], runs=runs)[0] if plan else None
        )
        at += len(plan)
    return out
