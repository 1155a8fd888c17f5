"""Reference profiles: measured once in the sandbox pool (median of 3 runs), stored, then reused."""

from __future__ import annotations

import json

import pytest

from tasks_library.models import ReferenceProfile
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from training.rewards import efficiency as E
from training.rewards.base import ReferenceStats
from training.rewards.reference import reference_profiles_ensure

pytestmark = pytest.mark.django_db

GROWTH_PROMPT = 'def has_duplicate(xs):\n    """True when some value appears twice in xs."""\n'
GROWTH_TASK = {
    "task_id": "growth/has_duplicate",
    "prompt": GROWTH_PROMPT,
    "entry_point": "has_duplicate",
    "reference_solution": "    return len(set(xs)) < len(xs)\n",
    "tests": (
        "def check(candidate):\n    assert candidate([1, 2, 1])\n"
        "    assert not candidate([1, 2, 3])\n"
    ),
    "files": {
        E.SIZES_FILE: json.dumps(
            {"sizes": [2000, 8000, 32000], "args": "lambda n: (list(range(n)),)"}
        )
    },
    "where": "test",
}


@pytest.fixture
def versions(humaneval):
    rows = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "entry_point": r["entry_point"],
            "reference_solution": r["canonical_solution"],
            "tests": r["test"],
            "where": "test",
        }
        for r in humaneval[:2]
    ]
    tasks_import(source="test", task_set_name="profiles", records=[*rows, GROWTH_TASK])
    return list(task_set_versions(task_set=task_set_get(name="profiles")))


def test_profiles_are_measured_once_stored_and_reused(versions):
    assert ReferenceProfile.objects.count() == 0
    stats = reference_profiles_ensure(versions)

    assert set(stats) == {v.pk for v in versions}
    profiles = {p.task_version_id: p for p in ReferenceProfile.objects.all()}
    assert set(profiles) == set(stats)
    for version in versions:
        profile = profiles[version.pk]
        assert profile.runs == 3
        assert profile.details["statuses"] == ["ok"] * 3
        assert len(profile.details["cpu_ms"]) == 3
        assert sorted(profile.details["cpu_ms"])[1] == pytest.approx(
            profile.cpu_ms, abs=1e-3
        )  # the median
        assert profile.wall_ms > 0 and profile.cpu_ms > 0
        assert stats[version.pk] == ReferenceStats(
            wall_ms=profile.wall_ms,
            cpu_ms=profile.cpu_ms,
            peak_memory_bytes=profile.peak_memory_bytes,
            growth_exponent=profile.growth_exponent,
        )

    # The growth spec's task has its exponent (set(): linear, give or take the fit's noise).
    growth_version = next(v for v in versions if v.task.task_id == "growth/has_duplicate")
    exponent = profiles[growth_version.pk].growth_exponent
    assert exponent is not None and 0.5 < exponent < 1.5
    assert profiles[growth_version.pk].details["growth"]["sizes"] == [2000, 8000, 32000]
    assert all(
        profiles[v.pk].growth_exponent is None for v in versions if v.pk != growth_version.pk
    )

    # Reused: a stored value comes back as stored (a new measurement could not give it), and
    # nothing new is written.
    ReferenceProfile.objects.filter(task_version_id=versions[0].pk).update(cpu_ms=12345.0)
    measured_at = {p.task_version_id: p.measured_at for p in ReferenceProfile.objects.all()}
    again = reference_profiles_ensure([v.pk for v in versions])
    assert again[versions[0].pk].cpu_ms == 12345.0
    assert ReferenceProfile.objects.count() == len(versions)
    assert {p.task_version_id: p.measured_at for p in ReferenceProfile.objects.all()} == measured_at


def test_only_missing_profiles_are_measured(versions):
    first = reference_profiles_ensure(versions[:1])
    assert set(first) == {versions[0].pk}
    ReferenceProfile.objects.filter(task_version_id=versions[0].pk).update(wall_ms=-1.0)
    both = reference_profiles_ensure(versions[:2])
    assert both[versions[0].pk].wall_ms == -1.0  # kept, not measured again
    assert both[versions[1].pk].wall_ms > 0
    assert ReferenceProfile.objects.count() == 2
