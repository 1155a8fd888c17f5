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
from training.agents.environment import execution_result
from training.rewards.base import GradedSubmission
from training.rewards.registry import reward_components
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


@pytest.mark.slow
def test_an_unfixed_repository_keeps_its_pass_to_pass_but_is_not_resolved():
    environment = built("python3.11-pytest").request_field()
    rows = {}
    for name, files in (("unfixed", BUGGY), ("fixed", FIXED)):
        result = grade_repository(files, TESTS, environment=environment)
        grade = execution_result(result, TESTS.ids)
        rows[name] = reward_components(
            GradedSubmission(task=TASK, code="", grade=grade), ["correctness", "resolved"]
        )
    assert 0 < rows["unfixed"]["correctness"] < 1 and rows["unfixed"]["resolved"] == 0.0
    assert rows["fixed"] == {"correctness": 1.0, "resolved": 1.0}
