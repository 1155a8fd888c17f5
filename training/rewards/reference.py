"""Reference profiles: how each task version's reference solution performs on its hidden tests,
measured once in the sandbox pool and kept (``tasks_library.models.ReferenceProfile``), the
baseline of the ``efficiency`` reward.

A profile is the median of :data:`RUNS` gradings of prompt + reference solution on the hidden
tests, with the suite's limits and workspace files, through the same queue and sandboxes that
grade rollouts: wall and CPU milliseconds and peak memory bytes; for a task with a growth spec
(``efficiency.SIZES_FILE``), also the fitted growth exponent. A version's profile never changes
(the version is immutable), so it is measured once: later calls read it.
"""

from __future__ import annotations

import statistics

from django.db import transaction

from sandboxes import result as R
from sandboxes.queue import run_many
from tasks_library.evaluation import hidden_tests_request
from tasks_library.models import ReferenceProfile, TaskVersion
from training.rewards import efficiency as E
from training.rewards.base import ReferenceStats

RUNS = 3


def reference_stats(profile: ReferenceProfile) -> ReferenceStats:
    """A stored profile as the rewards read it."""
    return ReferenceStats(
        wall_ms=profile.wall_ms,
        cpu_ms=profile.cpu_ms,
        peak_memory_bytes=profile.peak_memory_bytes,
        growth_exponent=profile.growth_exponent,
    )


def _profile(
    version: TaskVersion,
    results: list[R.ExecutionResult],
    growth: list[R.ExecutionResult],
    runs: int,
) -> ReferenceProfile | None:
    """The profile from a version's runs; None when the sandbox failed every run (an
    infrastructure error is no measurement: it is measured again next time)."""
    measured = [r for r in results if r.status != R.INFRA_ERROR]
    if not measured:
        return None
    details = {
        "statuses": [r.status for r in results],
        "wall_ms": [round(r.wall_ms, 3) for r in measured],
        "cpu_ms": [round(r.cpu_ms, 3) for r in measured],
        "call_cpu_ms": [round(r.call_cpu_ms, 3) for r in measured],
        "peak_memory_bytes": [r.peak_memory_bytes for r in measured],
        "enforcement": measured[0].enforcement,
    }
    exponent = None
    if growth:
        if any(r.status == R.INFRA_ERROR for r in growth):
            return None
        exponent, details["growth"] = E.growth_from_results(version, growth, runs=runs)
    return ReferenceProfile(
        task_version=version,
        wall_ms=statistics.median(r.wall_ms for r in measured),
        cpu_ms=statistics.median(r.cpu_ms for r in measured),
        peak_memory_bytes=int(statistics.median(r.peak_memory_bytes for r in measured)),
        growth_exponent=exponent,
        runs=len(measured),
        details=details,
    )


def reference_profiles_ensure(versions, *, runs: int = RUNS) -> dict[int, ReferenceStats]:
    """The reference profile of every version, measuring those not stored yet.

    Stored profiles are read; the missing ones are measured together (each reference graded
    ``runs`` times on its hidden tests, plus the growth timings of tasks with a growth spec,
    every request queued at once with ``run_many``: the sandbox pool runs them in parallel)
    and stored in one transaction.

    Args:
        versions: :class:`TaskVersion` objects or their ids.
        runs: gradings per reference; the profile holds their medians.

    Returns:
        Task version id -> :class:`ReferenceStats`, for every version measured or stored (a
        version whose every run was an infrastructure error is left out).
    """
    versions = list(versions)
    ids = [v if isinstance(v, int) else v.pk for v in versions]
    stored = {
        p.task_version_id: p for p in ReferenceProfile.objects.filter(task_version_id__in=ids)
    }
    missing_ids = [pk for pk in dict.fromkeys(ids) if pk not in stored]
    if missing_ids:
        missing = list(TaskVersion.objects.filter(pk__in=missing_ids).select_related("test_suite"))
        plans = [
            (
                [hidden_tests_request(v, v.prompt + v.reference_solution) for _ in range(runs)],
                E.growth_requests(v, v.prompt + v.reference_solution, runs=runs),
            )
            for v in missing
        ]
        flat = run_many([r for grading, growth in plans for r in (*grading, *growth)])
        profiles, at = [], 0
        for version, (grading, growth) in zip(missing, plans):
            results = flat[at : at + len(grading)]
            timed = flat[at + len(grading) : at + len(grading) + len(growth)]
            at += len(grading) + len(growth)
            profile = _profile(version, results, timed, runs)
            if profile is not None:
                profiles.append(profile)
        with transaction.atomic():
            # ignore_conflicts: a concurrent caller that stored the same version first wins.
            ReferenceProfile.objects.bulk_create(profiles, ignore_conflicts=True)
        stored.update(
            {
                p.task_version_id: p
                for p in ReferenceProfile.objects.filter(
                    task_version_id__in=[p.task_version_id for p in profiles]
                )
            }
        )
    return {pk: reference_stats(stored[pk]) for pk in ids if pk in stored}
