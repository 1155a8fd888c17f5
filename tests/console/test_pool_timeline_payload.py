"""Without a browser: the run page's websocket carries each step's phase and sandbox pool timeline,
in the back-fill and live, and the page holds the chart that draws it."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from console.asgi import application
from tests.console.test_dashboard_views import make_run, task_version
from tests.training.rollouts import graded
from training import services
from training.phase import PhaseTracker
from training.rollout import TaskSpec


def tracked_step(tracker: PhaseTracker) -> tuple[dict, dict]:
    """One step's phases as a trainer goes through them (real Redis, the session's real workers)."""
    tracker.set("rollout", {"python": 8})
    time.sleep(0.2)
    tracker.set("grading", {"python": 8})
    time.sleep(0.1)
    tracker.set("update")
    time.sleep(0.1)
    tracker.set("idle")
    return tracker.take_step()


def run_and_spec(name: str):
    """A run and one task to record its steps against."""
    run = make_run(name)
    spec = TaskSpec(
        task_version_id=task_version().pk,
        prompt="p",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    return run, spec


def record(run, spec, step: int, tracker: PhaseTracker):
    """Step ``step`` of ``run`` as the trainer records it, with the phases of
    :func:`tracked_step`."""
    metrics, timeline = tracked_step(tracker)
    rollouts = [graded(spec, i, r) for i, r in enumerate([0.0, 1.0])]
    return services.step_record(
        run_id=run.pk, step=step, rollouts=rollouts, metrics=metrics, timeline=timeline
    )


@pytest.mark.django_db(transaction=True)
def test_backfill_and_live_step_events_carry_the_pool_timeline():
    run, spec = run_and_spec("pool-timeline")
    tracker = PhaseTracker(run_id=run.pk, sample_every_s=0.05).start(["python"])
    try:
        first = record(run, spec, 1, tracker)

        async def watch():
            socket = WebsocketCommunicator(
                application, f"/ws/runs/{run.pk}/", headers=[(b"origin", b"http://127.0.0.1")]
            )
            connected, _ = await socket.connect()
            assert connected
            backfill = []
            while (event := await socket.receive_json_from(timeout=10))["kind"] != "backfill":
                backfill.append(event)
            await database_sync_to_async(record)(run, spec, 2, tracker)
            live = await socket.receive_json_from(timeout=10)
            await socket.disconnect()
            return backfill, live

        backfill, live = async_to_sync(watch)()
    finally:
        tracker.close()
    old = next(e for e in backfill if e["kind"] == "step")
    assert old["step"] == 1 and old["timeline"] == first.timeline
    assert live["kind"] == "step" and live["step"] == 2
    for event in (old, live):
        timeline = event["timeline"]
        assert [p for _a, _b, p in timeline["phases"]][-3:] == ["grading", "update", "idle"]
        assert "rollout" in [p for _a, _b, p in timeline["phases"]]
        assert (
            len(timeline["t"])
            == len(timeline["slots"])
            == len(timeline["depth"])
            == len(timeline["demand"])
            > 3
        )
        assert max(timeline["demand"]) >= 8 and min(timeline["slots"]) > 0
        assert event["metrics"]["timing/phase_rollout_s"] >= 0.2
    assert live["timeline"]["start"] == old["timeline"]["end"]


@pytest.mark.django_db
def test_the_run_page_holds_the_pool_chart_and_loads_it_before_the_socket_owner():
    run = make_run("pool-page")
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert 'id="pool-timeline"' in page
    assert page.index("console/pool_timeline.js") < page.index("console/run_live.js")
