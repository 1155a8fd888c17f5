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
