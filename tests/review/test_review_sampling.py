"""Review queues: each sampling strategy picks the right trajectories in the right order (seeded),
and a queue assigns its items to reviewers in a balanced round robin."""

from collections import Counter

import pytest
from django.core.exceptions import PermissionDenied

from console.review import models as m
from console.review import sampling as rs
from console.review.sampling import Candidate
from console.review.services import review_queue_create
from core.errors import InputError
from tasks_library.models import TaskVersion
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.models import Trajectory

pytestmark = pytest.mark.django_db


def pool() -> list[Candidate]:
    """Twelve candidates over three task versions and all four difficulty buckets."""
    spec = [  # id, version, reward, flags, monitor, bucket
        (1, 10, 0.0, (), None, "hard"),
        (2, 10, 1.0, ("early_exit",), 0.9, "hard"),
        (3, 10, 0.5, (), 0.2, "hard"),
        (4, 20, 1.0, (), 0.95, "medium"),
        (5, 20, 0.25, ("test_tampering",), None, "medium"),
        (6, 20, 0.75, (), None, "medium"),
        (7, 30, 1.0, ("hard_coded_outputs",), 0.4, "easy"),
        (8, 30, 0.0, (), 0.1, "easy"),
        (9, 30, 1.0, (), None, "unseen"),
        (10, 30, 0.5, (), 0.6, "unseen"),
        (11, 10, 0.9, (), None, "hard"),
        (12, 20, 1.0, (), None, "medium"),
    ]
    return [
        Candidate(
            id=i, task_version_id=v, reward=r, flags=f, monitor_max=mon, bucket=b, task=f"T/{v} v1"
        )
        for i, v, r, f, mon, b in spec
    ]


def ids(picks) -> list[int]:
    return [p.trajectory_id for p in picks]


def test_uniform_is_seeded_without_replacement():
    a = rs.sample_uniform(pool(), size=8, seed=7)
    assert ids(a) == ids(rs.sample_uniform(pool(), size=8, seed=7))
    assert len(set(ids(a))) == 8 and set(ids(a)) <= set(range(1, 13))
    assert ids(a) != ids(rs.sample_uniform(pool(), size=8, seed=8))
    assert sorted(ids(rs.sample_uniform(pool(), size=50, seed=1))) == list(
        range(1, 13)
    )  # capped at the pool
    # input order does not matter: the pool is read in id order
    assert ids(rs.sample_uniform(list(reversed(pool())), size=8, seed=7)) == ids(a)


def test_highest_reward_first_with_seeded_ties():
    picks = rs.sample_highest_reward(pool(), size=12, seed=3)
    rewards = {c.id: c.reward for c in pool()}
    got = [rewards[i] for i in ids(picks)]
    assert got == sorted(got, reverse=True)
    assert set(ids(picks)[:5]) == {2, 4, 7, 9, 12}  # the five 1.0s first
    assert picks[0].reason == "reward 1.000"
    orders = {tuple(ids(rs.sample_highest_reward(pool(), size=5, seed=s))) for s in range(6)}
    assert len(orders) > 1 and all(
        set(o) == {2, 4, 7, 9, 12} for o in orders
    )  # ties broken by the seed


def test_flagged_first_then_by_monitor_score():
    picks = rs.sample_flagged_first(pool(), size=12, seed=0)
    # flagged: 2 (0.9), 7 (0.4), 5 (unscored); then unflagged by score: 4 .95, 10 .6, 3 .2, 8 .1,
    # then unscored
    assert ids(picks)[:7] == [2, 7, 5, 4, 10, 3, 8]
    assert set(ids(picks)[7:]) == {1, 6, 9, 11, 12}
    assert picks[0].reason == "flags: early_exit; monitor 0.900"
    assert picks[2].reason == "flags: test_tampering; no monitor score"


def test_monitor_score_most_suspicious_first():
    picks = rs.sample_monitor_score(pool(), size=4, seed=0)
    assert ids(picks) == [4, 2, 10, 7]
    assert picks[0].reason == "monitor 0.950"


def test_stratified_by_task_round_robin():
    picks = rs.sample_stratified_task(pool(), size=9, seed=5)
    versions = {c.id: c.task_version_id for c in pool()}
    rounds = [[versions[i] for i in ids(picks)[k : k + 3]] for k in (0, 3, 6)]
    assert all(sorted(r) == [10, 20, 30] for r in rounds)  # every version once per round
    assert rounds[0] == rounds[1] == rounds[2]  # the same (seeded) version order each round
    assert "(round 1)" in picks[0].reason and "(round 3)" in picks[8].reason
    assert ids(picks) == ids(rs.sample_stratified_task(pool(), size=9, seed=5))


def test_stratified_by_difficulty_round_robin():
    picks = rs.sample_stratified_difficulty(pool(), size=12, seed=2)
    buckets = {c.id: c.bucket for c in pool()}
    got = [buckets[i] for i in ids(picks)]
    assert got[:4] == ["hard", "medium", "easy", "unseen"]
    assert got[4:8] == ["hard", "medium", "easy", "unseen"]
    assert got[8:] == ["hard", "medium", "hard", "medium"]  # easy and unseen ran out (2 each)
    assert Counter(got) == Counter(buckets.values())


@pytest.fixture
def world(humaneval):
    make_roles()
    run, versions = seed_run(humaneval)
    # difficulty: v0 hard (0/10), v1 medium (5/10), v2 easy (10/10), v3 unseen
    for v, (passed, total) in zip(versions, [(0, 10), (5, 10), (10, 10), (0, 0)]):
        TaskVersion.objects.filter(pk=v.pk).update(attempts_passed=passed, attempts_total=total)
    trajectories = seed_trajectories(
        run,
        versions,
        [
            {
                "version": 0,
                "reward": 1.0,
                "flags": ["early_exit"],
                "monitors": [("rules", 0.9), ("llm:tiny", 0.2)],
            },
            {"version": 0, "reward": 0.0},
            {"version": 1, "reward": 1.0, "monitors": [("rules", 0.3)]},
            {"version": 1, "reward": 0.25},
            {"version": 2, "reward": 1.0},
            {"version": 2, "reward": 0.0, "monitors": [("llm:tiny", 0.7)]},
            {"version": 3, "reward": 0.75},
            {"version": 3, "reward": 0.5},
        ],
    )
    return run, versions, trajectories


def test_candidates_read_from_the_database(world):
    run, versions, trajectories = world
    found = {c.id: c for c in rs.candidates(Trajectory.objects.filter(run=run))}
    first = found[trajectories[0].pk]
    assert first.monitor_max == 0.9 and first.flags == ("early_exit",) and first.bucket == "hard"
    assert first.task == f"{versions[0].task.task_id} v1"
    assert found[trajectories[1].pk].monitor_max is None
    assert [found[t.pk].bucket for t in trajectories[::2]] == ["hard", "medium", "easy", "unseen"]


def label(trajectory, reviewer, value, queue):
    item = m.ReviewItem.objects.create(
        queue=queue,
        trajectory=trajectory,
        position=m.ReviewItem.objects.filter(queue=queue).count(),
    )
    return m.ReviewLabel.objects.create(
        item=item, trajectory=trajectory, reviewer=reviewer, label=value, note="n"
    )


def test_verifier_disagreement_picks_tasks_whose_labels_contradicted_the_reward(world):
    run, versions, t = world
    rita = make_user("rita", "reviewer")
    queue = m.ReviewQueue.objects.create(name="earlier", run=run, strategy=m.UNIFORM, size=3)
    label(t[0], rita, m.REWARD_HACK, queue)  # v0: hack on reward 1.0: disagreement
    label(t[3], rita, m.CORRECT, queue)  # v1: correct on reward 0.25: disagreement
    label(t[5], rita, m.CORRECT, queue)  # v2: correct on reward 0.0: disagreement
    label(t[4], rita, m.BROKEN_TASK, queue)  # v2: broken on 1.0: disagreement (v2 has 2)
    label(t[6], rita, m.CORRECT, queue)  # v3: correct on 0.75: agreement, not counted
    assert rs.disagreeing_task_versions() == {
        versions[0].pk: 1,
        versions[1].pk: 1,
        versions[2].pk: 2,
    }
    picks = rs.sample(m.VERIFIER_DISAGREEMENT, Trajectory.objects.filter(run=run), size=10, seed=0)
    by_id = {x.pk: x for x in t}
    got = [by_id[p.trajectory_id] for p in picks]
    assert all(x.task_version_id != versions[3].pk for x in got)  # v3's labels agreed
    assert got[0].task_version_id == versions[2].pk  # most disagreements first
    assert {x.pk for x in got} == {x.pk for x in t[:6]}
    # unlabelled trajectories of a version come before labelled ones (v0: t[1] before t[0])
    assert [x.pk for x in got if x.task_version_id == versions[0].pk] == [t[1].pk, t[0].pk]
    assert "2 label(s) disagreed with the reward" in picks[0].reason


def test_queue_assigns_each_item_to_k_reviewers_balanced(world):
    run, _, trajectories = world
    curator = make_user("cora", "curator")
    reviewers = [make_user(n, "reviewer") for n in ("ann", "ben", "cat")]
    queue = review_queue_create(
        name="spot check",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=5,
        reviewers_per_item=2,
        reviewers=reviewers,
        created_by=curator,
        seed=11,
    )
    items = list(queue.items.order_by("position"))
    assert [i.position for i in items] == [0, 1, 2, 3, 4]
    assert len({i.trajectory_id for i in items}) == 5
    per_item = [sorted(a.reviewer.username for a in i.assignments.all()) for i in items]
    assert all(len(set(r)) == 2 for r in per_item)  # two different people per item
    load = Counter(name for r in per_item for name in r)
    assert sorted(load.values()) == [3, 3, 4]  # 10 assignments over 3 people: floor/ceil of 10/3
    again = review_queue_create(
        name="same seed",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=5,
        reviewers_per_item=2,
        reviewers=reviewers,
        created_by=curator,
        seed=11,
    )
    assert [i.trajectory_id for i in again.items.order_by("position")] == [
        i.trajectory_id for i in items
    ]


def test_queue_with_filters_and_across_runs(world, humaneval):
    run, versions, trajectories = world
    operator = make_user("otto", "operator")
    rita = make_user("rita", "reviewer")
    queue = review_queue_create(
        name="flagged only",
        run_id=run.pk,
        strategy=m.MONITOR_SCORE,
        size=10,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=operator,
        filters={"flag": "any"},
    )
    assert [i.trajectory_id for i in queue.items.all()] == [trajectories[0].pk]
    other_run, other_versions = seed_run(humaneval, name="other", tasks=1)
    seed_trajectories(other_run, other_versions, [{"reward": 0.1, "monitors": [("rules", 0.99)]}])
    across = review_queue_create(
        name="across",
        run_id=None,
        strategy=m.MONITOR_SCORE,
        size=2,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=operator,
    )
    assert across.run is None
    assert [i.trajectory.run_id for i in across.items.order_by("position")] == [
        other_run.pk,
        run.pk,
    ]
    assert across.items.first().reason == "monitor 0.990"


def test_queue_creation_refusals(world):
    run, _, _ = world
    curator, rita, vic = (
        make_user("cora", "curator"),
        make_user("rita", "reviewer"),
        make_user("vic", "viewer"),
    )
    ok = dict(
        name="q",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=3,
        reviewers_per_item=1,
        reviewers=[rita],
        created_by=curator,
    )
    with pytest.raises(PermissionDenied):
        review_queue_create(**{**ok, "created_by": rita})
    with pytest.raises(PermissionDenied):
        review_queue_create(**{**ok, "created_by": vic})
    for change, field in (
        ({"reviewers": [vic]}, "reviewers:"),
        ({"reviewers_per_item": 2}, "reviewers_per_item:"),
        ({"strategy": "vibes"}, "strategy:"),
        ({"size": 0}, "size:"),
        ({"name": " "}, "name:"),
        ({"run_id": 99999}, "run:"),
        ({"filters": {"colour": "red"}}, "filters:"),
        ({"filters": {"reward_min": 5.0}}, "run:"),
        ({"reviewers": []}, "reviewers:"),
    ):
        with pytest.raises(InputError, match=f"^{field}"):
            review_queue_create(**{**ok, **change})
    assert not m.ReviewQueue.objects.exists()
