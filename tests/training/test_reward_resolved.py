"""The ``resolved`` reward component: 1 only when the grading ended normally with every expected
test passing, from real gradings: function programs in the sandbox, and a repository workspace
left as it was, whose PASS_TO_PASS ids pass (correctness near 1) but whose FAIL_TO_PASS id
fails (resolved 0)."""

from __future__ import annotations

import pytest

from sandboxes.process import Limits
from sandboxes.queue import python_tests, run_many
from sandboxes.repository import grade_repository
from tests.environments import built
from tests.sandboxes.repository_fixture import BUGGY, FIXED, TESTS
from tests.training.repository_tasks import repository_task
from training.agents.environment import execution_result
from training.config import RunConfig
from training.rewards.base import GradedSubmission
from training.rewards.registry import reward_components, weighted_total
from training.rollout import TaskSpec

PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TESTS_SOURCE = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(2, 2) == 4\n"
    "    assert candidate(0, 0) == 0\n"
)
TASK = TaskSpec(
    task_version_id=12,
    prompt=PROMPT,
    entry_point="add",
    visible_tests="",
    hidden_tests=TESTS_SOURCE,
    timeout_s=10,
    reference_solution="    return a + b\n",
)


@pytest.mark.parametrize(
    ("body", "resolved"),
    [
        ("    return a + b\n", 1.0),
        ("    return a * b if a < 2 else a + b\n", 0.0),  # one of three tests fails
        ("    while True:\n        pass\n", 0.0),  # a timeout passes nothing
    ],
)
def test_a_function_program_is_resolved_only_when_every_test_passes(body, resolved):
    [grade] = run_many(
        [python_tests(PROMPT + body, TESTS_SOURCE, "add", limits=Limits(wall_timeout_s=3, cpu_s=3))]
    )
    values = reward_components(
        GradedSubmission(task=TASK, code=PROMPT + body, grade=grade), ["correctness", "resolved"]
    )
    assert values["resolved"] == resolved
    assert (values["correctness"] == 1.0) == (resolved == 1.0)


REPOSITORY_TASK = repository_task(BUGGY, TESTS, task_version_id=13)
HALF_FIX = {
    **BUGGY,
    "calc/ops.py": BUGGY["calc/ops.py"].replace(
        b"        return high - 1\n", b"        return high if value == high else high - 1\n"
    ),
}
BREAKS_ADD = {**FIXED, "calc/ops.py": FIXED["calc/ops.py"].replace(b"a + b", b"a - b")}


@pytest.mark.slow
def test_a_repository_workspace_that_resolves_nothing_earns_nothing():
    environment = built("python3.11-pytest").request_field()
    weights = RunConfig().reward_weights
    rows = {}
    for name, files in (
        ("unfixed", BUGGY),
        ("half", HALF_FIX),
        ("breaks_pass_to_pass", BREAKS_ADD),
        ("fixed", FIXED),
    ):
        result = grade_repository(files, TESTS, base=BUGGY, environment=environment)
        grade = execution_result(result, TESTS.ids)
        submission = GradedSubmission(task=REPOSITORY_TASK, code="", grade=grade)
        rows[name] = reward_components(submission, ["correctness", "resolved", *weights])
        rows[name]["reward"] = weighted_total(rows[name], weights)
        rows[name]["ids_passed"] = result.fraction
    # The unfixed workspace passes every PASS_TO_PASS id, and earns 0 from every component.
    assert rows["unfixed"]["ids_passed"] > 0.5
    assert rows["unfixed"]["correctness"] == rows["unfixed"]["resolved"] == 0.0
    assert rows["unfixed"]["reward"] == 0.0
    # One of the three FAIL_TO_PASS ids: a third, not resolved.
    assert rows["half"]["correctness"] == pytest.approx(1 / 3) and rows["half"]["resolved"] == 0
    # A fix that breaks a PASS_TO_PASS id earns nothing either.
    assert rows["breaks_pass_to_pass"]["correctness"] == 0.0
    assert rows["breaks_pass_to_pass"]["reward"] == 0.0
    assert rows["fixed"]["correctness"] == rows["fixed"]["resolved"] == 1.0
    assert rows["fixed"]["reward"] == 1.0
