"""The autoscaler's decision: the desired number of worker processes for a demand, the HPA-style
scale-down stabilisation, the policy's bounds; and the demand signals as Redis holds them."""

from __future__ import annotations

import time

import pytest

from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes.autoscale import ScalePolicy, Stabiliser, desired_workers


def policy(**kw) -> ScalePolicy:
    return ScalePolicy(**{"min_workers": 1, "max_workers": 4, "slots_per_worker": 3, **kw})


@pytest.mark.parametrize(
    "demand, expected",
    [
        (0, 1),  # nothing to do: the floor
        (1, 1),
        (3, 1),  # one worker's slots
        (4, 2),  # one more execution than a worker holds: a second worker
        (9, 3),
        (12, 4),
        (100, 4),  # the ceiling
        (-5, 1),  # a nonsense reading never goes under the floor
    ],
)
def test_desired_workers_is_ceil_of_demand_over_slots_within_bounds(demand, expected):
    assert desired_workers(demand, policy()) == expected


def test_the_floor_holds_even_without_demand():
    assert desired_workers(0, policy(min_workers=2)) == 2


def test_stabiliser_scales_up_at_once_and_down_after_the_window():
    stabiliser = Stabiliser(window_s=5.0)
    assert stabiliser.recommend(1, now=0.0) == 1
    assert stabiliser.recommend(4, now=1.0) == 4  # up: at once
    assert stabiliser.recommend(1, now=2.0) == 4  # down: held at the window's highest
    assert stabiliser.recommend(2, now=5.9) == 4
    assert (
        stabiliser.recommend(1, now=6.1) == 2
    )  # the 4 of t=1 left the window; the 2 of t=5.9 is in it
    assert stabiliser.recommend(1, now=11.0) == 1


def test_a_zero_window_follows_the_demand_both_ways():
    stabiliser = Stabiliser(window_s=0.0)
    assert [stabiliser.recommend(d, now=t) for t, d in enumerate([1, 3, 1, 2])] == [1, 3, 1, 2]


@pytest.mark.parametrize(
    "bad, flag",
    [
        ({"min_workers": 0}, "--min-workers"),
        ({"min_workers": 3, "max_workers": 2}, "--max-workers"),
        ({"slots_per_worker": 0}, "--concurrency"),
        ({"scale_down_delay_s": -1}, "--scale-down-delay"),
        ({"interval_s": 0}, "--scale-interval"),
        ({"drain_timeout_s": 0}, "--drain-timeout"),
    ],
)
def test_bad_bounds_are_refused_naming_the_flag(bad, flag):
    with pytest.raises(ValueError, match=flag):
        policy(**bad)


def test_signals_take_the_larger_of_announced_and_queued_demand():
    signals = D.PoolSignals(runtime="python", depth=3, in_flight=2, slots=2, published=8)
    assert signals.queued_demand == 5 and signals.demand == 8
    signals.published = 1
    assert signals.demand == 5


def test_published_demand_sums_live_publishers_and_expires(runtime):
    D.publish("run-1-rank-0", phase="rollout", demand={runtime: 16})
    D.publish("run-1-rank-1", phase="rollout", demand={runtime: 8}, ttl_s=1)
    D.publish("run-2-rank-0", phase="update", demand={runtime: 0})
    assert D.published_demand(runtime) == 24
    assert D.publishers(runtime)["run-2-rank-0"]["phase"] == "update"
    time.sleep(1.3)  # the second rank stopped refreshing: its demand is gone, and so is its name
    assert D.published_demand(runtime) == 16
    assert sorted(D.publishers(runtime)) == ["run-1-rank-0", "run-2-rank-0"]
    D.withdraw("run-1-rank-0", [runtime])
    assert D.published_demand(runtime) == 0


def test_pool_signals_count_the_queue_in_flight_and_live_slots(runtime):
    client = Q.connection()
    client.lpush(Q.pending_key(runtime), "a", "b", "c")
    for worker, holding, alive in (("w-0", 2, True), ("w-1", 0, True), ("w-dead", 1, False)):
        client.sadd(Q.workers_key(runtime), worker)
        if holding:
            client.lpush(Q.processing_key(worker), *["x"] * holding)
        if alive:
            client.set(Q.alive_key(worker), "1", ex=5)
    D.publish("trainer", phase="rollout", demand={runtime: 4})
    try:
        signals = D.pool_signals(runtime)
    finally:
        for worker in ("w-0", "w-1", "w-dead"):
            client.delete(Q.processing_key(worker), Q.alive_key(worker))
    assert (signals.depth, signals.in_flight, signals.slots, signals.published) == (3, 3, 2, 4)
    assert signals.held == {"w-0": 2, "w-1": 0}
    assert signals.phases == {"trainer": "rollout"}
    assert signals.demand == 6


def test_a_negative_demand_is_refused(runtime):
    with pytest.raises(ValueError, match=runtime):
        D.publish("trainer", phase="rollout", demand={runtime: -1})
