"""The trainer's phase tracker over the session's real Redis and sandbox workers: it announces its
phase and sandbox demand (expiring when the trainer dies), keeps the seconds per phase, samples
the pool, and the step's timeline is persisted and sent in the step event."""

from __future__ import annotations

import itertools
import time

import pytest

from sandboxes import demand as D
from sandboxes import queue as Q
from tests.console.test_dashboard_views import make_run, task_version
from tests.training.rollouts import graded
from training import selectors, services
from training.phase import PhaseTracker, downsample, publisher_name
from training.rollout import TaskSpec, sandbox_demand

TESTS = "def check(candidate):\n    assert candidate(2) == 4\n"


def tracker(run_id: int, **kw) -> PhaseTracker:
    return PhaseTracker(run_id=run_id, **{"sample_every_s": 0.1, **kw})


def test_phases_demand_and_pool_samples_of_one_step():
    me = tracker(900_001).start(["python"])
    name = publisher_name(900_001, 0)
    try:
        assert D.publishers("python")[name]["phase"] == "idle"
        me.set("rollout", {"python": 6})
        assert D.publishers("python")[name] == {
            **D.publishers("python")[name],
            "phase": "rollout",
            "demand": 6,
        }
        # real executions while in the rollout phase
        results = Q.run_many(
            [
                Q.python_tests(
                    "def square(x):\n    import time; time.sleep(0.3); return x * x\n",
                    TESTS,
                    "square",
                )
                for _ in range(2)
            ]
        )
        assert [r.status for r in results] == ["ok", "ok"]
        me.set("grading", {"python": 2})
        time.sleep(0.25)
        me.set("update")
        assert D.publishers("python")[name]["demand"] == 0
        time.sleep(0.25)
        me.set("idle")
        metrics, timeline = me.take_step()
    finally:
        me.close()
    assert name not in D.publishers("python"), "close() withdraws the demand"

    phases = [phase for _a, _b, phase in timeline["phases"]]
    assert [p for p in phases if p != "idle"] == ["rollout", "grading", "update"]
    starts_ends = [(a, b) for a, b, _p in timeline["phases"]]
    assert all(
        a <= b for a, b in starts_ends
    )  # to the millisecond: a phase left at once has no width
    assert all(b1 <= a2 for (_a1, b1), (a2, _b2) in itertools.pairwise(starts_ends))
    assert timeline["start"] <= starts_ends[0][0] and starts_ends[-1][1] == timeline["end"]
    assert metrics["timing/phase_rollout_s"] >= 0.3 and metrics["timing/phase_grading_s"] >= 0.25
    assert metrics["timing/phase_update_s"] >= 0.25
    assert sum(metrics.values()) == pytest.approx(timeline["end"] - timeline["start"], abs=0.01)

    t = timeline["t"]
    assert len(t) >= 8 and t == sorted(t)
    assert (
        len(
            {
                len(t),
                *(len(timeline[s]) for s in ("slots", "depth", "in_flight", "demand", "target")),
            }
        )
        == 1
    )
    live = Q.live_workers("python")
    assert live > 0 and max(timeline["slots"]) == live
    # the announced 6 is the demand while rolling out, whatever the queue held
    rollout = next((a, b) for a, b, p in timeline["phases"] if p == "rollout")
    during = [d for ts, d in zip(t, timeline["demand"]) if rollout[0] <= ts < rollout[1]]
    assert during and min(during) >= 6
    assert timeline["target"] == [None] * len(t)  # no autoscaler in this session


def test_a_dead_trainers_demand_expires_and_a_live_one_is_refreshed():
    alive = tracker(900_002, ttl_s=1).start(["python"])
    dead = tracker(900_003, ttl_s=1).start(["python"])
    try:
        alive.set("rollout", {"python": 4})
        dead.set("rollout", {"python": 5})
        dead.stopping.set()  # the process died: no refresh, no withdraw
        dead.thread.join()
        time.sleep(1.6)
        live = D.publishers("python")
        assert (
            publisher_name(900_002, 0) in live and live[publisher_name(900_002, 0)]["demand"] == 4
        )
        assert publisher_name(900_003, 0) not in live
    finally:
        alive.close()


def test_an_unknown_phase_is_refused():
    with pytest.raises(ValueError, match="warmup"):
        tracker(900_004, sample=False).set("warmup")


def test_downsample_keeps_each_buckets_peak_and_last_time():
    t = [float(i) for i in range(10)]
    series = {"slots": [1, 1, 3, 1, 1, 1, 2, 1, 1, 1], "target": [None] * 10}
    out_t, out = downsample(t, series, limit=4)
    assert out_t == [2.0, 5.0, 8.0, 9.0]
    assert out == {"slots": [3, 1, 2, 1], "target": [None] * 4}
    assert downsample(t, series, limit=10) == (t, series)


def test_demand_per_runtime_counts_tasks_by_harness():
    def spec(harness: str) -> TaskSpec:
        return TaskSpec(
            task_version_id=1,
            prompt="",
            entry_point="f",
            visible_tests="",
            hidden_tests="",
            timeout_s=1,
            harness=harness,
        )

    assert sandbox_demand([spec("python-check")] * 3 + [spec("js-console-assert")], each=4) == {
        "python": 12,
        "node": 4,
    }


@pytest.mark.django_db
def test_the_timeline_is_persisted_and_sent_with_the_step_newest_steps_only_in_a_backfill():
    run = make_run("phases")
    spec = TaskSpec(
        task_version_id=task_version().pk,
        prompt="p",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    me = tracker(run.pk).start(["python"])
    try:
        for step in (1, 2, 3):
            me.set("rollout", {"python": 8})
            time.sleep(0.15)
            me.set("update")
            time.sleep(0.1)
            me.set("idle")
            metrics, timeline = me.take_step()
            rollouts = [graded(spec, i, 1.0) for i in range(2)]
            services.step_record(
                run_id=run.pk, step=step, rollouts=rollouts, metrics=metrics, timeline=timeline
            )
    finally:
        me.close()
    stored = list(run.steps.order_by("step"))
    assert all(s.timeline["phases"] and s.timeline["t"] for s in stored)
    assert stored[1].timeline["start"] == stored[0].timeline["end"]  # windows tile the run's time
    assert stored[2].metrics["timing/phase_rollout_s"] >= 0.15
    event = selectors.step_event(stored[2])
    assert event["timeline"] == stored[2].timeline
    backfill = selectors.run_backfill_bounded(run_id=run.pk, after=0, timeline_steps=2)
    steps = [e for e in backfill if e["kind"] == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3]
    assert ["timeline" in e for e in steps] == [False, True, True]
    assert steps[2]["timeline"]["phases"] == stored[2].timeline["phases"]
