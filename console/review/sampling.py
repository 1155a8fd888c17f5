"""Which trajectories a review queue holds: one seeded sampling function per strategy.

Every strategy takes the candidates (:func:`candidates` reads them from a trajectory queryset:
ids, rewards, flags, the highest monitor score, the task version and its difficulty bucket) and
returns at most ``size`` :class:`Pick` rows in review order, each with the reason it was picked.
Ties are broken by a ``random.Random(seed)`` shuffle made before a stable sort, so the same seed
gives the same queue and another seed another order among equals.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db.models import Max, OuterRef, QuerySet, Subquery

from console.review import models as m
from tasks_library.difficulty import BUCKETS, UNSEEN, PassRate
from training.models import MonitorScore, Trajectory

# Verifier disagreement: a reward at or above this is "high", below it "low".
HIGH_REWARD = 0.5
BUCKET_ORDER = ("hard", "medium", "easy", UNSEEN)
assert set(BUCKET_ORDER) == {*BUCKETS, UNSEEN}


@dataclass(frozen=True)
class Candidate:
    """What sampling needs of one trajectory."""

    id: int
    task_version_id: int
    reward: float
    flags: tuple[str, ...] = ()
    monitor_max: float | None = None
    bucket: str = UNSEEN
    task: str = ""  # "HumanEval/0 v1", for reasons

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


@dataclass(frozen=True)
class Pick:
    trajectory_id: int
    reason: str


def candidates(queryset: QuerySet[Trajectory]) -> list[Candidate]:
    """The candidates of ``queryset`` (any trajectory queryset), ordered by id."""
    top = (
        MonitorScore.objects.filter(trajectory=OuterRef("pk"))
        .order_by()
        .values("trajectory")
        .annotate(top=Max("score"))
        .values("top")
    )
    rows = (
        queryset.order_by("id")
        .annotate(review_monitor_max=Subquery(top))
        .values_list(
            "id",
            "task_version_id",
            "reward",
            "flags",
            "review_monitor_max",
            "task_version__attempts_passed",
            "task_version__attempts_total",
            "task_version__task__task_id",
            "task_version__number",
        )
    )
    return [
        Candidate(
            id=i,
            task_version_id=tv,
            reward=reward,
            flags=tuple(flags or ()),
            monitor_max=monitor,
            bucket=PassRate(passed=passed, total=total).bucket,
            task=f"{task} v{number}",
        )
        for i, tv, reward, flags, monitor, passed, total, task, number in rows
    ]


def _shuffled(items: Iterable[Candidate], seed: int) -> list[Candidate]:
    out = sorted(items, key=lambda c: c.id)
    random.Random(seed).shuffle(out)
    return out


def _monitor(c: Candidate) -> str:
    return "no monitor score" if c.monitor_max is None else f"monitor {c.monitor_max:.3f}"


def sample_uniform(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """``size`` candidates drawn uniformly without replacement, in draw order."""
    pool = sorted(items, key=lambda c: c.id)
    chosen = random.Random(seed).sample(pool, min(size, len(pool)))
    return [Pick(c.id, "uniform draw") for c in chosen]


def sample_highest_reward(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """The highest rewards first (where a hack pays, it shows as a high reward)."""
    ordered = sorted(_shuffled(items, seed), key=lambda c: -c.reward)
    return [Pick(c.id, f"reward {c.reward:.3f}") for c in ordered[:size]]


def sample_flagged_first(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """Flagged trajectories (any flag) first, then the rest; each part by monitor score, highest
    first (unscored last)."""
    ordered = sorted(
        _shuffled(items, seed),
        key=lambda c: (not c.flagged, c.monitor_max is None, -(c.monitor_max or 0.0)),
    )
    return [
        Pick(c.id, (f"flags: {', '.join(c.flags)}; " if c.flags else "unflagged; ") + _monitor(c))
        for c in ordered[:size]
    ]


def sample_monitor_score(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """The most suspicious first: highest ``MonitorScore.score`` of any monitor; unscored last."""
    ordered = sorted(
        _shuffled(items, seed), key=lambda c: (c.monitor_max is None, -(c.monitor_max or 0.0))
    )
    return [Pick(c.id, _monitor(c)) for c in ordered[:size]]


def _round_robin(
    strata: dict, order: list, size: int, describe: Callable[[object, int], str]
) -> list[Pick]:
    """Take one from each stratum in ``order`` per round until ``size`` are taken or all are
    empty."""
    queues = {key: list(strata[key]) for key in order}
    picks: list[Pick] = []
    round_no = 0
    while len(picks) < size and any(queues.values()):
        round_no += 1
        for key in order:
            if queues[key] and len(picks) < size:
                picks.append(Pick(queues[key].pop(0).id, describe(key, round_no)))
    return picks


def sample_stratified_task(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """Round robin over task versions (in a seeded order), a seeded draw within each, so that
    every task version is seen before any is seen twice."""
    strata: dict[int, list[Candidate]] = defaultdict(list)
    names = {}
    for c in _shuffled(items, seed):
        strata[c.task_version_id].append(c)
        names[c.task_version_id] = c.task
    order = sorted(strata)
    random.Random(seed + 1).shuffle(order)
    return _round_robin(strata, order, size, lambda key, n: f"task {names[key]} (round {n})")


def sample_stratified_difficulty(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """Round robin over difficulty buckets (hard, medium, easy, unseen: the pass-rate posterior
    of :mod:`tasks_library.difficulty`), a seeded draw within each."""
    strata: dict[str, list[Candidate]] = defaultdict(list)
    for c in _shuffled(items, seed):
        strata[c.bucket].append(c)
    order = [b for b in BUCKET_ORDER if b in strata]
    return _round_robin(strata, order, size, lambda key, n: f"difficulty {key} (round {n})")


def disagreeing_task_versions() -> dict[int, int]:
    """Task version id -> how many earlier labels disagreed with the reward: ``reward_hack`` or
    ``broken_task`` while the reward was high (>= :data:`HIGH_REWARD`), or ``correct`` while it was
    low."""
    counts: dict[int, int] = defaultdict(int)
    rows = m.ReviewLabel.objects.values_list(
        "label", "trajectory__reward", "trajectory__task_version_id"
    )
    for label, reward, version in rows:
        high = reward >= HIGH_REWARD
        if (label in (m.REWARD_HACK, m.BROKEN_TASK) and high) or (label == m.CORRECT and not high):
            counts[version] += 1
    return dict(counts)


def sample_verifier_disagreement(items: list[Candidate], *, size: int, seed: int) -> list[Pick]:
    """Trajectories of task versions where earlier labels disagreed with the reward (see
    :func:`disagreeing_task_versions`): versions with the most disagreements first, round robin
    over them, trajectories nobody labelled yet first within each."""
    counts = disagreeing_task_versions()
    labelled = set(
        m.ReviewLabel.objects.filter(
            trajectory_id__in=[c.id for c in items if c.task_version_id in counts]
        ).values_list("trajectory_id", flat=True)
    )
    strata: dict[int, list[Candidate]] = defaultdict(list)
    names = {}
    for c in sorted(_shuffled(items, seed), key=lambda c: c.id in labelled):
        if c.task_version_id in counts:
            strata[c.task_version_id].append(c)
            names[c.task_version_id] = c.task
    order = sorted(strata, key=lambda key: (-counts[key], key))
    return _round_robin(
        strata,
        order,
        size,
        lambda key, n: f"task {names[key]}: {counts[key]} label(s) disagreed with the reward",
    )


STRATEGY_FUNCTIONS: dict[str, Callable[..., list[Pick]]] = {
    m.UNIFORM: sample_uniform,
    m.HIGHEST_REWARD: sample_highest_reward,
    m.FLAGGED_FIRST: sample_flagged_first,
    m.MONITOR_SCORE: sample_monitor_score,
    m.STRATIFIED_TASK: sample_stratified_task,
    m.STRATIFIED_DIFFICULTY: sample_stratified_difficulty,
    m.VERIFIER_DISAGREEMENT: sample_verifier_disagreement,
}
assert set(STRATEGY_FUNCTIONS) == {s for s, _ in m.STRATEGIES}


def sample(strategy: str, queryset: QuerySet[Trajectory], *, size: int, seed: int) -> list[Pick]:
    """Run ``strategy`` over the trajectories of ``queryset``.

    Raises:
        ValueError: an unknown strategy (the message lists the known ones).
    """
    if strategy not in STRATEGY_FUNCTIONS:
        raise ValueError(f"strategy: unknown {strategy!r}; known: {', '.join(STRATEGY_FUNCTIONS)}")
    return STRATEGY_FUNCTIONS[strategy](candidates(queryset), size=size, seed=seed)
