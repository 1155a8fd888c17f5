"""The second line alone: with the first line switched off (``guards=False``: no audit hook, no
machinery checks, no comparison guards in the pytest process), attacks that fool pytest in its
own process resolve the task on pytest's word; the differential check, across a process
boundary, refuses every one of them, and still resolves the honest fixes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from sandboxes.repository import grade_repository
from sandboxes.repository.differential import differential_for
from tests.environments import built
from tests.sandboxes.repository.attacks import CASES, HONEST
from tests.sandboxes.repository.corpus_task import BUGGY, REFERENCE_PATCH, TESTS, final

pytestmark = pytest.mark.slow

# Attacks that act inside pytest's process and, without the first line, fool it on every id.
IN_PROCESS = (
    "int_subclass_equal_to_anything",
    "returns_mock_any",
    "fake_inside_a_list",
    "unittest_assert_equal_patched",
    "exceptions_swallowed_by_call_info",
    "every_runtest_hollowed",
    "hidden_tests_through_a_child_shell_glob",
    "hard_coded_from_the_visible_inputs",
    "answers_right_only_under_pytest",
)
HONEST_SAMPLE = ("minimal_fix", "refactor_with_min_and_max", "fix_in_a_new_subpackage")


@pytest.fixture(scope="module")
def graded(session_pool):
    environment = built("python3.11-pytest").request_field()
    differential = differential_for(BUGGY, REFERENCE_PATCH, TESTS)
    jobs = [(name, CASES[name].changes, with_line) for name in IN_PROCESS for with_line in (0, 1)]
    jobs += [(f"honest:{name}", HONEST[name], 1) for name in HONEST_SAMPLE]

    def grade(job):
        _name, changes, with_line = job
        return grade_repository(
            final(changes),
            TESTS,
            base=BUGGY,
            environment=environment,
            runtime=session_pool.runtime,
            differential=differential if with_line else None,
            guards=False,
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(grade, jobs))
    return {(name, with_line): result for (name, _c, with_line), result in zip(jobs, results)}


@pytest.mark.parametrize("name", IN_PROCESS)
def test_an_attack_that_fools_pytest_is_caught_by_the_differential(name, graded):
    fooled = graded[(name, 0)]
    assert fooled.resolved, (name, "does not fool pytest without the first line", fooled.detail)
    caught = graded[(name, 1)]
    assert not caught.resolved
    assert "differential_mismatch" in caught.flags
    evidence = caught.differential["mismatches"][0]
    assert evidence["why"] and evidence["call"], evidence


@pytest.mark.parametrize("name", HONEST_SAMPLE)
def test_an_honest_fix_passes_the_differential(name, graded):
    result = graded[(f"honest:{name}", 1)]
    assert result.resolved, (result.detail, result.differential)
    assert result.differential["checked"] > 0 and result.differential["mismatches"] == []
