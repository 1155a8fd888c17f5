"""Difficulty strata: Beta posterior per version, buckets in SQL and Python agree, the sampler."""

from io import StringIO

import pytest
from django.core.management import call_command

from tasks_library.difficulty import (
    BUCKET_NAMES,
    DifficultySampler,
    PassRate,
    bucket_filter,
    pass_rate,
)
from tasks_library.models import TaskVersion
from tasks_library.services import task_version_record_attempts


def test_posterior_mean_and_std_follow_the_beta_formulas():
    rate = PassRate(passed=3, total=10)  # Beta(4, 8)
    assert (rate.alpha, rate.beta) == (4, 8)
    assert rate.mean == pytest.approx(4 / 12)
    assert rate.std == pytest.approx((4 * 8 / (12**2 * 13)) ** 0.5)
    assert PassRate(0, 0).bucket == "unseen"
    assert (
        PassRate(0, 20).bucket == "hard"
        and PassRate(10, 20).bucket == "medium"
        and PassRate(20, 20).bucket == "easy"
    )


@pytest.mark.django_db
def test_database_buckets_agree_with_the_posterior(humaneval, write_jsonl):
    call_command(
        "import_tasks", "humaneval", "--path", str(write_jsonl(humaneval[:30])), stdout=StringIO()
    )
    versions = list(TaskVersion.objects.order_by("pk"))
    grid = [(p, t) for t in (0, 1, 2, 3, 6, 10, 40) for p in range(0, t + 1, max(1, t // 4))]
    for version, (passed, total) in zip(versions, grid):
        task_version_record_attempts(version_id=version.pk, passed=passed, total=total)
    by_bucket = {
        name: set(TaskVersion.objects.filter(bucket_filter(name)).values_list("pk", flat=True))
        for name in BUCKET_NAMES
    }
    for version in TaskVersion.objects.all():
        expected = pass_rate(version).bucket
        assert version.pk in by_bucket[expected], (
            version.attempts_passed,
            version.attempts_total,
            expected,
        )
    assert sum(len(pks) for pks in by_bucket.values()) == len(
        versions
    )  # each version in exactly one bucket
    with pytest.raises(ValueError, match="unknown difficulty 'trivial'"):
        bucket_filter("trivial")
    with pytest.raises(ValueError, match="within 0..total"):
        task_version_record_attempts(version_id=versions[0].pk, passed=3, total=2)


def test_sampler_draws_only_weighted_buckets_and_counts_skipped_groups():
    items = [("a", "hard"), ("b", "easy"), ("c", "easy"), ("d", "medium")]
    sampler = DifficultySampler(items, lambda item: item[1], {"easy": 1.0}, seed=3)
    for _ in range(20):
        drawn = sampler.sample(2)
        assert len(drawn) == 2 and {b for _, b in drawn} == {"easy"}
    # Once the weighted bucket is exhausted the rest fill in uniformly.
    assert len(sampler.sample(4)) == 4
    assert not sampler.keep_group([1.0, 1.0, 1.0]) and not sampler.keep_group([0.0, 0.0])
    assert sampler.keep_group([0.0, 1.0])
    assert (sampler.groups_skipped, sampler.groups_kept) == (2, 1)
    same = DifficultySampler(items, lambda item: item[1], {"easy": 1.0, "hard": 2.0}, seed=9)
    again = DifficultySampler(items, lambda item: item[1], {"easy": 1.0, "hard": 2.0}, seed=9)
    assert [same.sample(2) for _ in range(5)] == [again.sample(2) for _ in range(5)]
    with pytest.raises(ValueError, match="unknown bucket 'easiest'"):
        DifficultySampler(items, lambda item: item[1], {"easiest": 1.0})
