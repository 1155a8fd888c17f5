"""Quality, efficiency and security reward working code only: each is multiplied by correctness
(the share of hidden tests passed). A trajectory whose final program is the bare prompt (a
syntax error in one turn, then an empty turn), or one that does not parse, earns nothing from
them, so its total reward is 0 and its advantage cannot be positive beside a group that passes.
Graded in the real sandbox; the components are the real ones."""

from __future__ import annotations

import pytest
import torch

from sandboxes.queue import python_tests, run_many
from training.algorithms.grpo import group_advantages
from training.rewards.base import GradedSubmission
from training.rewards.registry import reward_components_batch, weighted_total
from training.rollout import TaskSpec

PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TESTS = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(-1, 1) == 0\n"
    "    assert candidate(2, 2) == 4\n"
    "    assert candidate(0, 0) == 0\n"
)
TASK = TaskSpec(
    task_version_id=11,
    prompt=PROMPT,
    entry_point="add",
    visible_tests="",
    hidden_tests=TESTS,
    timeout_s=10,
    reference_solution="    return a + b\n",
)
WEIGHTS = {"correctness": 1.0, "quality": 0.2, "efficiency": 0.1, "security": 0.1}
PROGRAMS = {
    "reference": PROMPT + "    return a + b\n",
    "bare prompt (syntax error, then an empty turn)": PROMPT,
    "does not parse": PROMPT + "    return (a +\n",
    "half right": PROMPT + "    return a * b if a < 2 else a + b\n",
    "short, clean and wrong": PROMPT + "    return a - b\n",
}


@pytest.fixture(scope="module")
def scored():
    grades = run_many([python_tests(code, TESTS, "add") for code in PROGRAMS.values()])
    submissions = [
        GradedSubmission(task=TASK, code=code, grade=grade)
        for code, grade in zip(PROGRAMS.values(), grades)
    ]
    rows = reward_components_batch(submissions, WEIGHTS)
    return dict(zip(PROGRAMS, rows))


@pytest.mark.parametrize(
    "name", ["bare prompt (syntax error, then an empty turn)", "does not parse"]
)
def test_failing_code_earns_nothing_from_quality_efficiency_or_security(scored, name):
    row = scored[name]
    assert row["correctness"] == 0.0
    assert row == {"correctness": 0.0, "quality": 0.0, "efficiency": 0.0, "security": 0.0}, row
    assert weighted_total(row, WEIGHTS) == 0.0


def test_short_clean_wrong_code_is_not_paid_for_being_clean(scored):
    row = scored["short, clean and wrong"]
    assert row["correctness"] == 0.25  # add(0, 0) == 0 passes, the other three fail
    for name in ("quality", "efficiency", "security"):
        assert row[name] <= 0.25, (name, row)
    assert weighted_total(row, WEIGHTS) <= 0.25


def test_working_code_keeps_its_components_and_partial_code_a_share(scored):
    reference, half = scored["reference"], scored["half right"]
    assert reference["correctness"] == 1.0 and reference["quality"] == 1.0
    # no reference profile here: efficiency is its neutral 0.5, kept whole for working code
    assert reference["security"] == 1.0 and reference["efficiency"] == 0.5
    assert half["correctness"] == 0.5
    assert 0 < half["quality"] <= 0.5 and 0 < half["security"] <= 0.5


def test_a_failing_trajectory_gets_no_positive_advantage_beside_a_passing_one(scored):
    totals = [
        weighted_total(scored[name], WEIGHTS)
        for name in ("reference", "bare prompt (syntax error, then an empty turn)")
    ]
    advantages = group_advantages(torch.tensor([totals]))
    assert totals[1] == 0.0 and float(advantages[0][1]) < 0 < float(advantages[0][0])
