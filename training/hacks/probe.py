"""Run a submission and its task's reference on a few inputs and compare what they return.

The inputs are the visible tests' own literal arguments (EvalPlus-style seeds, as
``tasks_library.validation.testgen`` finds them) plus a few type-aware mutants, up to
:data:`PROBE_INPUTS`. Both programs go through the ``python-probe`` verifier, which reports
the ``repr`` of each call's value, or the error when the value could not cross to the tests'
sandbox (only exact builtin types cross). Used by the ``patched_return`` detector; optional
and cheap: two small executions, queued at once, only for submissions that want one
(:func:`probe_wanted`). :func:`probes_run` runs the probes of many submissions in one batch
(a trainer step) and leaves each answer in ``submission.extra["probe_results"]``.
"""

from __future__ import annotations

import ast
import functools
import json
import re

from sandboxes import result as R
from sandboxes.harness.python_check import PROBE_CALL_TIMEOUT_S
from sandboxes.process import Limits
from sandboxes.queue import python_tests, run_many
from tasks_library.validation.testgen import mutate_inputs, seed_inputs
from training.hacks.source import source_of

PROBE_INPUTS = 6
RESULTS_KEY = "probe_results"
NOT_PLAIN = re.compile(r"value of type (\S+) is not plain data")


@functools.lru_cache(maxsize=1024)
def _inputs(visible_tests: str, entry_point: str) -> tuple[tuple, ...]:
    try:
        seeds = seed_inputs(visible_tests, entry_point)
    except (SyntaxError, ValueError):
        return ()
    extra = mutate_inputs(seeds, count=max(0, PROBE_INPUTS - len(seeds)), seed=0)
    return tuple((seeds + extra)[:PROBE_INPUTS])


def probe_inputs(task) -> list[tuple]:
    """The argument tuples a probe calls the entry point with (empty: nothing to probe)."""
    return list(_inputs(task.visible_tests or "", task.entry_point))


def probe_wanted(submission) -> bool:
    """True when a probe could tell something the grade did not: probing is on
    (``extra["probe"]``, default True), the task is a ``python-check`` task with a reference,
    the grade is a real failure (a full pass returned plain, equal data), and the program
    has machinery to return a non-builtin object (a class, ``type(...)``, ``unittest.mock``)."""
    task = submission.task
    if not submission.extra.get("probe", True) or RESULTS_KEY in submission.extra:
        return False
    if getattr(task, "harness", "") != "python-check" or not getattr(
        task, "reference_solution", ""
    ):
        return False
    if submission.grade.status in (R.OK, R.INFRA_ERROR):
        return False
    source = source_of(submission)
    machinery = (
        bool(source.classes)
        or any(s.name in ("type", "builtins.type") for s in source.calls)
        or any("mock" in s.name for s in source.imports)
    )
    return machinery and bool(probe_inputs(task))


def probe_requests(submission) -> list[dict]:
    """The two ``python-probe`` requests (the submission's, the reference's), or [] without
    inputs."""
    task = submission.task
    inputs = probe_inputs(task)
    if not inputs:
        return []
    probe = json.dumps([repr(args) for args in inputs])
    wall_s = float(task.timeout_s) + PROBE_CALL_TIMEOUT_S * len(inputs)
    limits = Limits(wall_timeout_s=wall_s, cpu_s=int(wall_s) + 1)
    return [
        python_tests(
            code,
            probe,
            task.entry_point,
            prompt=task.prompt,
            limits=limits,
            files=task.files or {},
            verifier="python-probe",
            setup=getattr(task, "setup_code", ""),
        )
        for code in (submission.code, task.prompt + task.reference_solution)
    ]


def probes_run(submissions, *, timeout_s: float | None = 60.0) -> int:
    """Probe every submission that wants it (:func:`probe_wanted`), all queued at once;
    each gets ``extra["probe_results"] = (inputs, its result, the reference's result)``.

    Returns:
        How many submissions were probed.
    """
    wanted = [s for s in submissions if probe_wanted(s)]
    requests = []
    for submission in wanted:
        requests.extend(probe_requests(submission))
    answers = iter(run_many(requests, timeout_s=timeout_s))
    for submission in wanted:
        submission.extra[RESULTS_KEY] = (
            probe_inputs(submission.task),
            next(answers),
            next(answers),
        )
    return len(wanted)


def _kind(output: str) -> str | None:
    try:
        return type(ast.literal_eval(output)).__name__
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def probe_mismatches(inputs, mine: R.ExecutionResult, reference: R.ExecutionResult) -> list[dict]:
    """Inputs where the reference returned a literal value and the submission returned an
    object that is not plain data (refused at the boundary, or with a non-literal ``repr``).
    A plain value of another builtin type is a wrong answer, not a patched one: not listed."""
    found = []
    if R.INFRA_ERROR in (mine.status, reference.status):
        return found
    for args, own, ref in zip(inputs, mine.tests, reference.tests):
        expected = _kind(ref.output) if ref.passed else None
        if expected is None:
            continue
        refused = NOT_PLAIN.search(own.error)
        if refused:
            found.append(
                {"input": repr(args)[:60], "returned": refused.group(1), "reference": expected}
            )
        elif own.passed and _kind(own.output) is None:
            found.append(
                {"input": repr(args)[:60], "returned": own.output[:60], "reference": expected}
            )
    return found
