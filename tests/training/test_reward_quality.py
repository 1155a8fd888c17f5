"""The quality reward: ruff findings and radon complexity per logical line of the completion,
against the reference solution (real ruff and radon)."""

from __future__ import annotations

import pytest

from sandboxes import result as R
from training.rewards import quality as Q
from training.rewards.base import GradedSubmission
from training.rewards.registry import reward_components, reward_components_batch
from training.rollout import TaskSpec

OK = R.ExecutionResult(status=R.OK)

PROMPT = (
    "from typing import List\n"
    "import os\n"  # unused by everyone: the prompt's finding, not the completion's
    "\n\n"
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """Whether any two numbers are closer to each other than threshold."""\n'
)
REFERENCE = (
    "    for i, a in enumerate(numbers):\n"
    "        for j, b in enumerate(numbers):\n"
    "            if i != j and abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
# Same behaviour: an unused import and variable, a comparison with True, and needless branches.
SLOPPY = (
    "    import sys\n"
    "    unused = 0\n"
    "    found = False\n"
    "    for i in range(len(numbers)):\n"
    "        for j in range(len(numbers)):\n"
    "            if i != j:\n"
    "                if abs(numbers[i] - numbers[j]) < threshold:\n"
    "                    if found == False:\n"
    "                        found = True\n"
    "                    else:\n"
    "                        found = True\n"
    "    return found\n"
)


def task(version_id: int = 7, reference: str = REFERENCE) -> TaskSpec:
    return TaskSpec(
        task_version_id=version_id,
        prompt=PROMPT,
        entry_point="has_close_elements",
        visible_tests="",
        hidden_tests="",
        timeout_s=10,
        reference_solution=reference,
    )


def sub(completion: str, spec: TaskSpec | None = None) -> GradedSubmission:
    spec = spec or task()
    return GradedSubmission(task=spec, code=spec.prompt + completion, grade=OK)


def test_reference_scores_one_and_sloppy_code_lower():
    reference, sloppy = Q.quality_batch([sub(REFERENCE), sub(SLOPPY)])
    assert reference == 1.0
    assert sloppy < 0.75
    figures = Q.measure(PROMPT + SLOPPY, PROMPT)
    assert {"F401", "F841", "E712"} <= set(figures.findings)
    assert figures.decision_points > Q.measure(PROMPT + REFERENCE, PROMPT).decision_points


def test_only_the_completion_is_judged():
    figures = Q.measure(PROMPT + REFERENCE, PROMPT)
    assert figures.findings == ()  # the prompt's unused ``import os`` (F401) is not the answer's
    assert figures.logical_lines == 5
    whole = Q.measure(PROMPT + REFERENCE, "")
    assert "F401" in whole.findings and whole.logical_lines > figures.logical_lines


def test_unparsable_code_scores_zero():
    assert Q.quality(sub("    return (\n")) == 0.0
    assert not Q.measure(PROMPT + "    return (\n", PROMPT).parsed


def test_per_submission_callable_and_registry_agree_with_the_batch():
    completions = [REFERENCE, SLOPPY, "    return any(True for _ in numbers)\n"]
    passed = R.ExecutionResult(status=R.OK, tests=[R.TestResult(id="t1", passed=True)])
    submissions = [
        GradedSubmission(task=task(), code=PROMPT + c, grade=passed) for c in completions
    ]
    batch = Q.quality_batch(submissions)
    assert [Q.quality(s) for s in submissions] == batch
    assert [reward_components(s, ["quality"])["quality"] for s in submissions] == batch
    assert [
        row["quality"] for row in reward_components_batch(submissions, ["quality", "correctness"])
    ] == batch
    # the registry's quality counts only as far as the program is correct (here: no test passed)
    assert [reward_components(sub(c), ["quality"])["quality"] for c in completions] == [0.0] * 3


def test_humaneval_references_score_one(humaneval):
    submissions = [
        sub(
            row["canonical_solution"],
            TaskSpec(
                task_version_id=10_000 + i,
                prompt=row["prompt"],
                entry_point=row["entry_point"],
                visible_tests="",
                hidden_tests=row["test"],
                timeout_s=10,
                reference_solution=row["canonical_solution"],
            ),
        )
        for i, row in enumerate(humaneval)
    ]
    assert Q.quality_batch(submissions) == [1.0] * len(humaneval)


def test_reference_figures_are_cached_per_task_version():
    spec = task(version_id=424242)
    Q.quality_batch([sub(SLOPPY, spec)])
    key = Q._reference_key(spec)
    assert key in Q._reference_cache
    cached = Q._reference_cache[key]
    assert Q.reference_figures_many([spec])[0] is cached
    # Another reference under the same id is another key (the text's hash is part of it).
    other = task(version_id=424242, reference="    return False\n")
    assert Q._reference_key(other) != key


def test_without_reference_the_figures_are_judged_absolutely():
    bare = task(version_id=99, reference="")
    clean, sloppy = Q.quality_batch([sub(REFERENCE, bare), sub(SLOPPY, bare)])
    assert clean < 1.0  # its decision points count against a clean, branch-free zero
    assert sloppy < clean


@pytest.mark.parametrize(
    "code, weight", [("F841", 1.0), ("B006", 1.0), ("SIM108", 0.5), ("W291", 0.25)]
)
def test_finding_weights(code, weight):
    assert Q.finding_weight(code) == weight
