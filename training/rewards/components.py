"""The built-in reward components. Each returns a value in [0, 1], higher is better.

``correctness`` and ``resolved`` are here; ``quality`` (ruff and radon against the reference),
``efficiency`` (time and memory against the reference's profile) and ``security`` (audit events
recorded in the sandbox, and the source's suspicious constructs) live in their own modules and
register on import, below. A component may carry ``.batch(submissions) -> list[float]``
(quality does: one ruff run per batch); :func:`training.rewards.registry.reward_components_batch`
uses it.
"""

from __future__ import annotations

from training.rewards.base import GradedSubmission, correctness_of
from training.rewards.registry import reward


@reward("correctness")
def correctness(submission: GradedSubmission) -> float:
    """The fraction of hidden tests passed, counted per expected test id (a checker's partial
    credit where the verifier gives one); 0 without tests. On a repository task, the fraction
    of FAIL_TO_PASS ids passed, gated on every PASS_TO_PASS id passing
    (:func:`~training.rewards.base.correctness_of`): a workspace that resolves nothing earns 0."""
    return correctness_of(submission)


@reward("resolved")
def resolved(submission: GradedSubmission) -> float:
    """1.0 when the grading ended normally with every expected test passed, else 0.0: SWE-bench's
    *resolved* (every FAIL_TO_PASS and PASS_TO_PASS id passes) on a repository task, all hidden
    tests on a function task. The binary outcome reward of SWE-Gym (Pan et al., 2024) and SkyRL;
    ``correctness`` gives partial credit instead (on a repository task, the FAIL_TO_PASS ids'
    share, only when no PASS_TO_PASS id broke)."""
    grade = submission.grade
    return 1.0 if grade.passed and grade.tests_total else 0.0


# Registered on import (after correctness, which they do not need).
from training.rewards import efficiency, quality, security  # noqa: E402

BUILTIN_MODULES = (efficiency, quality, security)
