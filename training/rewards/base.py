"""What every reward component and hack detector reads: one graded submission.

A :class:`GradedSubmission` is built after grading, on the host, from the trajectory's
final code, the grading result on the hidden tests (fresh sandbox), the last visible-test
result the policy saw, and the reference solution's profile. Reward functions are plain
callables ``f(submission) -> float in [0, 1]`` registered by name (training/rewards/registry.py);
detectors are callables ``d(submission) -> Flag | None`` (training/hacks/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandboxes.result import ExecutionResult


@dataclass(frozen=True)
class ReferenceStats:
    """The reference solution on the hidden tests, in the same sandbox: wall and CPU
    milliseconds, peak memory in bytes, and a fitted time-growth exponent where known."""

    wall_ms: float
    cpu_ms: float = 0.0
    peak_memory_bytes: int = 0
    growth_exponent: float | None = None


@dataclass
class GradedSubmission:
    """One trajectory's final answer and everything measured about it.

    Attributes:
        task: the :class:`training.rollout.TaskSpec` (prompt, entry point, visible and
            hidden tests, harness, files, reference solution).
        code: the program that was graded (prompt + completion).
        grade: the hidden-test result from a fresh sandbox.
        visible: the visible-test result of the trajectory's last turn, or None.
        reference: the reference's profile, or None when not measured.
    """

    task: object
    code: str
    grade: ExecutionResult
    visible: ExecutionResult | None = None
    reference: ReferenceStats | None = None
    extra: dict = field(default_factory=dict)


def correctness_of(submission: GradedSubmission) -> float:
    """What ``correctness`` pays, in [0, 1].

    A function task: the share of expected tests passed (a checker's partial credit where it
    gives one). A repository task: the share of FAIL_TO_PASS ids passed, and 0 unless every
    PASS_TO_PASS id passed too, so a workspace that resolves nothing earns nothing (an unfixed
    repository otherwise keeps most of its ids: ~0.95 on a task of 100 PASS_TO_PASS and 5
    FAIL_TO_PASS ids); without FAIL_TO_PASS ids, 1 only when every id passed.
    """
    grade = submission.grade
    repository = getattr(submission.task, "repository", None)
    if getattr(submission.task, "kind", "") != "repository" or repository is None:
        return grade.score
    passed = {test.id for test in grade.tests if test.passed}
    if any(test_id not in passed for test_id in repository.pass_to_pass):
        return 0.0
    if not repository.fail_to_pass:
        return 1.0 if grade.passed else 0.0
    return sum(test_id in passed for test_id in repository.fail_to_pass) / len(
        repository.fail_to_pass
    )
