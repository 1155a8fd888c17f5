"""Fresh test inputs per grading: drawn from the hidden tests' literal calls with a seed, answered
by the reference in the sandbox, added to the hidden tests and recorded, so that the grading can
be replayed; a program that memorised the fixed tests fails them, the reference passes."""

from dataclasses import replace

import pytest

from sandboxes.queue import python_tests, run_many
from training.fresh_tests import grading_seed, replayed_tests, with_fresh_tests
from training.rollout import TaskSpec

PROMPT = "def scale(xs, k):\n    '''Each number of xs times k.'''\n"
TASK = TaskSpec(
    task_version_id=7,
    prompt=PROMPT,
    entry_point="scale",
    visible_tests="def check(candidate):\n    assert candidate([1, 2], 3) == [3, 6]\n",
    hidden_tests=(
        "def check(candidate):\n"
        "    assert candidate([1, 2], 3) == [3, 6]\n"
        "    assert candidate([5, 0, 7], 2) == [10, 0, 14]\n"
    ),
    timeout_s=10,
    reference_solution="    return [x * k for x in xs]\n",
)
MEMORISED = (
    "    table = {((1, 2), 3): [3, 6], ((5, 0, 7), 2): [10, 0, 14]}\n"
    "    return table.get((tuple(xs), k), [])\n"
)


def passes(task: TaskSpec, body: str) -> tuple[int, int]:
    [result] = run_many(
        [python_tests(PROMPT + body, task.hidden_tests, task.entry_point, prompt=PROMPT)]
    )
    return result.tests_passed, result.tests_total


def test_fresh_inputs_are_answered_by_the_reference_recorded_and_replayable():
    seed = grading_seed(run_seed=3, step=5, task_version_id=TASK.task_version_id)
    [fresh] = with_fresh_tests([TASK], count=6, seeds=[seed])
    record = fresh.fresh_tests
    assert record["seed"] == seed and 1 <= len(record["inputs"]) <= 6
    assert len(record["outputs"]) == len(record["inputs"])
    assert fresh.hidden_tests.startswith(TASK.hidden_tests.rstrip("\n"))
    assert fresh.hidden_tests.count("assert ") == 2 + len(record["inputs"])
    # the recorded draw rebuilds exactly the suite that was graded, without the sandbox
    assert replayed_tests(TASK.hidden_tests, record) == fresh.hidden_tests
    # the same seed draws the same inputs (a resumed run grades alike); another seed others
    assert with_fresh_tests([TASK], count=6, seeds=[seed])[0].fresh_tests == record
    other = with_fresh_tests([TASK], count=6, seeds=[seed + 1])[0].fresh_tests
    assert other["inputs"] != record["inputs"]

    assert passes(fresh, TASK.reference_solution) == passes(fresh, TASK.reference_solution)
    passed, total = passes(fresh, TASK.reference_solution)
    assert passed == total == 2 + len(record["inputs"])
    # memorising the fixed tests passes them, not the fresh ones
    assert passes(TASK, MEMORISED) == (2, 2)
    passed, total = passes(fresh, MEMORISED)
    assert total == 2 + len(record["inputs"]) and passed < total


def test_a_task_without_literal_calls_keeps_its_fixed_tests():
    plain = replace(TASK, hidden_tests="def check(candidate):\n    assert candidate(*ARGS)\n")
    [kept] = with_fresh_tests([plain], count=4, seeds=[1])
    assert kept.hidden_tests == plain.hidden_tests
    assert kept.fresh_tests == {
        "seed": 1,
        "inputs": [],
        "outputs": [],
        "note": "no literal inputs to mutate",
    }
    assert replayed_tests(plain.hidden_tests, kept.fresh_tests) == plain.hidden_tests


def test_a_broken_record_is_refused():
    with pytest.raises(ValueError, match="2 recorded inputs but 1 outputs"):
        replayed_tests(TASK.hidden_tests, {"inputs": ["(1,)", "(2,)"], "outputs": ["1"]})
    with pytest.raises(ValueError, match="tasks but"):
        with_fresh_tests([TASK], count=2, seeds=[])
