"""The repository-grading corpus (tests/sandboxes/repository/attacks.py and
attacks_second_round.py), graded for real: every
attack in a fresh session, as the trainer grades a final workspace (the task's files as the
base, the differential against the reference patch on). None may resolve the task; every
honest fix must, with no flag.

One built environment and one session worker serve the module; the gradings run four at a
time.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandboxes.repository import grade_repository
from sandboxes.repository.differential import differential_for
from tests.environments import built
from tests.sandboxes.repository.attacks import CASES as FIRST_ROUND
from tests.sandboxes.repository.attacks import HONEST
from tests.sandboxes.repository.attacks_second_round import CASES as SECOND_ROUND
from tests.sandboxes.repository.corpus_task import BUGGY, REFERENCE_PATCH, TESTS, final

pytestmark = pytest.mark.slow

CASES = {**FIRST_ROUND, **SECOND_ROUND}
assert len(CASES) == len(FIRST_ROUND) + len(SECOND_ROUND), "an attack named twice"
CLASSES = ("equality", "machinery", "exemption", "heap", "bytecode", "file_read", "expected")


@pytest.fixture(scope="module")
def graded(session_pool):
    environment = built("python3.11-pytest").request_field()
    differential = differential_for(BUGGY, REFERENCE_PATCH, TESTS)
    jobs = {name: case.changes for name, case in CASES.items()}
    jobs.update({f"honest:{name}": changes for name, changes in HONEST.items()})

    def grade(name):
        tests = dataclasses.replace(TESTS, timeout_s=8.0) if name == "hangs" else TESTS
        return grade_repository(
            final(jobs[name]),
            tests,
            base=BUGGY,
            environment=environment,
            runtime=session_pool.runtime,
            differential=differential,
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(jobs, pool.map(grade, jobs), strict=True))


def test_the_corpus_covers_every_class_three_times_and_sixteen_honest_styles():
    counts = Counter(case.klass for case in CASES.values())
    assert len(CASES) >= 70, len(CASES)
    assert all(counts[k] >= 3 for k in CLASSES), counts
    assert len(HONEST) >= 16


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_attack_is_not_resolved(name, graded):
    result = graded[name]
    assert not result.resolved, (name, result.per_id, result.detail, result.differential)
    assert result.status != "infra_error", result.detail
    assert result.fail_to_pass_fraction < 1.0


@pytest.mark.parametrize("name", sorted(HONEST))
def test_an_honest_fix_is_resolved(name, graded):
    result = graded[f"honest:{name}"]
    assert result.resolved, (result.detail, result.flags, result.differential, result.stdout_tail)
    assert result.flags == []
    assert result.differential.get("mismatches") == []
