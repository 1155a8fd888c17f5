"""Fresh test inputs for each grading: memorising a task's fixed tests does not pay.

The seeds' first defence against reward hacking is "multiple dynamically generated test cases
rather than fixed test sets". With ``fresh_tests`` = N in a run's config, every step draws, for
each ``python-check`` task it grades, up to N new inputs EvalPlus-style
(:mod:`tasks_library.validation.testgen`: the hidden tests' literal calls mutated by type),
runs the task's reference on them twice in the sandbox (the oracle; an input whose output is
not a stable literal is dropped) and appends an ``assert`` per kept input to the hidden tests
that step's group is graded on. Every trajectory of the group is graded on the same tests, so
their rewards stay comparable (GRPO's advantages).

Seeded and recorded: the draw's seed is a function of the run's seed, the step and the task
version (:func:`grading_seed`), and each trajectory records ``{"seed", "inputs", "outputs"}``
(``Trajectory.fresh_tests``), from which :func:`replayed_tests` rebuilds exactly the suite it
was graded on, without the sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from sandboxes import result as R
from tasks_library.validation.testgen import (
    assertion,
    extend_check,
    mutate_inputs,
    oracle_tests,
    probe_request,
    probe_twice,
    seed_inputs,
)
from training.rollout import TaskSpec


def grading_seed(*, run_seed: int, step: int, task_version_id: int) -> int:
    """The seed of a step's fresh inputs for one task version (the same on a resumed run)."""
    return (run_seed * 1_000_003 + step * 7_919 + task_version_id) % 2**31


def replayed_tests(hidden_tests: str, record: dict) -> str:
    """The suite a grading ran: ``hidden_tests`` with the recorded fresh inputs' assertions
    (``record``: a trajectory's ``fresh_tests``; empty: the fixed tests alone).

    Raises:
        ValueError: the record's inputs and outputs differ in number, or the suite has no
            ``check`` to extend.
    """
    inputs, outputs = record.get("inputs", []), record.get("outputs", [])
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} recorded inputs but {len(outputs)} outputs")
    if not inputs:
        return hidden_tests
    statements = [assertion(ast.literal_eval(i), o) for i, o in zip(inputs, outputs, strict=True)]
    return extend_check(hidden_tests, [s for s in statements if s])


def _eligible(task: TaskSpec) -> list[tuple]:
    if task.harness != "python-check" or not task.reference_solution:
        return []
    try:
        return seed_inputs(task.hidden_tests, task.entry_point)
    except (SyntaxError, ValueError):
        return []


def with_fresh_tests(tasks: list[TaskSpec], *, count: int, seeds: list[int]) -> list[TaskSpec]:
    """``tasks`` with up to ``count`` fresh inputs each added to their hidden tests and recorded
    in ``fresh_tests`` (``seeds[i]`` draws task ``i``'s). The reference probes of every task
    are queued at once. A task that is not ``python-check``, has no literal calls to mutate, or
    whose reference answered no new input alike twice, keeps its fixed tests (its record says
    why in ``note``).

    Raises:
        ValueError: ``seeds`` and ``tasks`` differ in length.
    """
    if len(seeds) != len(tasks):
        raise ValueError(f"{len(tasks)} tasks but {len(seeds)} seeds")
    plans = []
    for task, seed in zip(tasks, seeds, strict=True):
        inputs = mutate_inputs(_eligible(task), count=count, seed=seed) if count else []
        request = (
            probe_request(
                program=task.prompt + task.reference_solution,
                prompt=task.prompt,
                entry_point=task.entry_point,
                inputs=inputs,
                timeout_s=task.timeout_s,
                files=task.files,
                setup=task.setup_code,
                environment=task.environment,
            )
            if inputs
            else None
        )
        plans.append((task, seed, inputs, request))
    probes = probe_twice([request for *_, request in plans])
    out = []
    for (task, seed, inputs, _request), probe in zip(plans, probes, strict=True):
        record: dict = {"seed": seed, "inputs": [], "outputs": []}
        if probe is None:
            record["note"] = "no literal inputs to mutate"
            out.append(replace(task, fresh_tests=record))
            continue
        first, second = probe
        kept = []
        if R.INFRA_ERROR not in (first.status, second.status) and first.status != R.TIMEOUT:
            kept = oracle_tests(inputs, first, second)
        if not kept:
            record["note"] = f"the reference answered no new input alike twice ({first.status})"
            out.append(replace(task, fresh_tests=record))
            continue
        record["inputs"] = [repr(args) for args, _output, _statement in kept]
        record["outputs"] = [output for _args, output, _statement in kept]
        hidden = extend_check(task.hidden_tests, [statement for *_, statement in kept])
        out.append(replace(task, hidden_tests=hidden, fresh_tests=record))
    return out
