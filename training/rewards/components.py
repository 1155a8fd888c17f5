"""The built-in reward components. Each returns a value in [0, 1], higher is better.

``correctness`` is here; ``quality`` (ruff and radon against the reference), ``efficiency``
(time and memory against the reference's profile) and ``security`` (audit events recorded in
the sandbox, and the source's suspicious constructs) live in their own modules and register on
import, below. A component may carry ``.batch(submissions) -> list[float]`` (quality does: one
ruff run per batch); :func:`training.rewards.registry.reward_components_batch` uses it.
"""

from __future__ import annotations

from training.rewards.base import GradedSubmission
from training.rewards.registry import reward


@reward("correctness")
def correctness(submission: GradedSubmission) -> float:
    """The fraction of hidden tests passed, counted per expected test id (a checker's partial
    credit where the verifier gives one); 0 without tests."""
    return submission.grade.score


# Registered on import (after correctness, which they do not need).
from training.rewards import efficiency, quality, security  # noqa: E402

BUILTIN_MODULES = (efficiency, quality, security)
