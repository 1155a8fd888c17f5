"""Difficulty strata: a pass-rate posterior per task version, buckets, and the sampler training
uses.

Each graded attempt at a task version (an evaluation sample, a rollout's hidden-test
grading) counts as a Bernoulli trial. With a uniform prior the pass rate's posterior
is ``Beta(1 + passed, 1 + total - passed)``; its mean places the version in a bucket.
The sampler draws tasks by bucket weight and applies DAPO's dynamic sampling: a group
whose rewards are all equal has zero group-relative advantage, teaches nothing, and is
skipped (Yu et al., 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
Scale", section 3.2).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import F, Q

# name -> [low, high) of the posterior mean; "unseen" has no attempts yet.
BUCKETS = {"hard": (0.0, 0.25), "medium": (0.25, 0.75), "easy": (0.75, 1.0001)}
UNSEEN = "unseen"
BUCKET_NAMES = (UNSEEN, *BUCKETS)


@dataclass(frozen=True)
class PassRate:
    """The pass-rate posterior of one task version: ``Beta(alpha, beta)``."""

    passed: int
    total: int

    @property
    def alpha(self) -> int:
        return 1 + self.passed

    @property
    def beta(self) -> int:
        return 1 + self.total - self.passed

    @property
    def mean(self) -> float:
        """Posterior mean, in [0, 1]: (1 + passed) / (2 + total)."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def std(self) -> float:
        """Posterior standard deviation of the pass rate."""
        a, b = self.alpha, self.beta
        return (a * b / ((a + b) ** 2 * (a + b + 1))) ** 0.5

    @property
    def bucket(self) -> str:
        if self.total == 0:
            return UNSEEN
        return next(name for name, (low, high) in BUCKETS.items() if low <= self.mean < high)


def pass_rate(version) -> PassRate:
    """The posterior of a :class:`~tasks_library.models.TaskVersion` from its attempt counts."""
    return PassRate(passed=version.attempts_passed, total=version.attempts_total)


def bucket_filter(name: str) -> Q:
    """A queryset filter selecting the task versions in bucket ``name``.

    Raises:
        ValueError: an unknown bucket (the message lists the known ones).
    """
    if name == UNSEEN:
        return Q(attempts_total=0)
    if name not in BUCKETS:
        raise ValueError(f"unknown difficulty {name!r}; known: {', '.join(BUCKET_NAMES)}")
    low, high = BUCKETS[name]
    # low <= (1 + p) / (2 + t) < high, kept linear in the columns so the database filters.
    return (
        Q(attempts_total__gt=0)
        & Q(attempts_passed__gte=low * (F("attempts_total") + 2) - 1)
        & Q(attempts_passed__lt=high * (F("attempts_total") + 2) - 1)
    )


@dataclass
class DifficultySampler:
    """Draws tasks by bucket weight; counts groups skipped by dynamic sampling.

    Args:
        items: what to sample (task specs); ``bucket_of(item)`` names each one's bucket.
        weights: bucket name -> weight (missing buckets weigh 0; all-zero or empty
            means uniform over items).
        seed: the sampler's own RNG seed (its state is part of a checkpoint).

    Raises:
        ValueError: a negative weight or an unknown bucket name.
    """

    items: Sequence
    bucket_of: callable
    weights: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    groups_skipped: int = 0
    groups_kept: int = 0

    def __post_init__(self) -> None:
        for name, weight in self.weights.items():
            if name not in BUCKET_NAMES:
                raise ValueError(
                    f"difficulty weight for unknown bucket {name!r}; known: "
                    f"{', '.join(BUCKET_NAMES)}"
                )
            if weight < 0:
                raise ValueError(f"difficulty weight for {name!r} must be >= 0, got {weight}")
        self.rng = random.Random(self.seed)

    def sample(self, count: int) -> list:
        """``count`` distinct items (fewer when there are fewer), drawn by bucket weight."""
        pool = list(self.items)
        chosen = []
        while pool and len(chosen) < count:
            weights = [self.weights.get(self.bucket_of(item), 0.0) for item in pool]
            if not self.weights or sum(weights) == 0:
                weights = [1.0] * len(pool)
            pick = self.rng.choices(range(len(pool)), weights=weights)[0]
            chosen.append(pool.pop(pick))
        return chosen

    def keep_group(self, rewards: Sequence[float]) -> bool:
        """False (and counted as skipped) when every reward of the group is equal."""
        informative = len(rewards) > 1 and max(rewards) != min(rewards)
        if informative:
            self.groups_kept += 1
        else:
            self.groups_skipped += 1
        return informative
