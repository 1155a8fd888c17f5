"""The built-in reward components. Each returns a value in [0, 1], higher is better."""

from __future__ import annotations

from training.rewards.base import GradedSubmission
from training.rewards.registry import reward


@reward("correctness")
def correctness(submission: GradedSubmission) -> float:
    """The fraction of hidden tests passed, counted per expected test id (a checker's partial
    credit where the verifier gives one); 0 without tests."""
    return submission.grade.score
