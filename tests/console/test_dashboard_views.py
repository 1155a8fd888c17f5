"""The live dashboard's reads: per-component reward histograms in step events (back-fill and live)
with a bounded number of queries, the bounded back-fill of a long run, the components API, the
comparison page, and the sandbox pool API against the session's real Redis and sandbox workers."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.asgi import application
from core.events import run_group
from sandboxes import queue as Q
from tasks_library.models import EnvironmentVersion, Task, TaskSet, TaskVersion, TestSuiteVersion
from tests.training.rollouts import graded
from training import selectors, services
from training.models import HeldOutEvaluation, StepMetric, TrainingRun, Trajectory
from training.rollout import TaskSpec

BINS = [i / 10 for i in range(11)]


def task_version() -> TaskVersion:
    env, _ = EnvironmentVersion.objects.get_or_create(
        content_hash="e" * 64, defaults={"name": "python", "runtime": "python3.11"}
    )
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash="s" * 64, defaults={"visible_tests": "", "hidden_tests": "x"}
    )
    task = Task.objects.create(task_id=f"Dash/{Task.objects.count()}", source="test")
    return TaskVersion.objects.create(
        task=task,
        number=1,
        content_hash=task.task_id.lower().ljust(64, "0"),
        prompt="p",
        entry_point="f",
        reference_solution="r",
        environment=env,
        test_suite=suite,
        verdict=TaskVersion.VERDICT_VALID,
    )


def make_run(name: str = "dash", **config) -> TrainingRun:
    return TrainingRun.objects.create(
        task_set=TaskSet.objects.create(name=name),
        total_steps=100,
        status=TrainingRun.RUNNING,
        config={"reward_weights": {"correctness": 1.0, "efficiency": 0.5}, **config},
    )


def rewards_of(step: int) -> list[tuple[float, float]]:
    """Eight (correctness, efficiency) pairs: correctness climbs with the step, efficiency
    wobbles."""
    return [
        (min(1.0, (i / 7) * (0.3 + step / 40)), 1.0 - (i / 8) * (0.5 + (step % 10) / 20))
        for i in range(8)
    ]


def add_steps(run: TrainingRun, version: TaskVersion, steps, *, dropped: bool = True) -> None:
    """Steps as ``step_record`` leaves them, written in bulk; one extra dropped ``infra_error``
    trajectory per step that no histogram may count."""
    metrics_rows, trajectories = [], []
    for step in steps:
        pairs = rewards_of(step)
        totals = [(c + 0.5 * e) / 1.5 for c, e in pairs]
        metrics_rows.append(
            StepMetric(
                run=run,
                step=step,
                reward_mean=sum(totals) / len(totals),
                reward_histogram=services.reward_histogram(totals),
                reward_bins=BINS,
                metrics={
                    "reward/mean": sum(totals) / len(totals),
                    "reward/pass_rate": 0.25,
                    "reward/correctness": 0.4,
                    "reward/efficiency": 0.6,
                    "flags/rate": 0.125,
                    "policy/entropy": 2.0 - step / 100,
                    "loss/kl": step / 1000,
                    "loss/policy": 0.1,
                    "tokens/generated": 400,
                    "timing/generation_s": 1.0,
                    "timing/sandbox_s": 0.5,
                    "timing/grading_s": 0.3,
                    "timing/update_s": 0.2,
                },
            )
        )
        for i, ((c, e), total) in enumerate(zip(pairs, totals)):
            trajectories.append(
                Trajectory(
                    run=run,
                    step=step,
                    group=0,
                    index_in_group=i,
                    task_version=version,
                    status="ok",
                    reward=total,
                    reward_components={"correctness": c, "efficiency": e},
                )
            )
        if dropped:
            trajectories.append(
                Trajectory(
                    run=run,
                    step=step,
                    group=0,
                    index_in_group=99,
                    task_version=version,
                    status="infra_error",
                    reward=0.0,
                    flags=["infra_error"],
                    reward_components={"correctness": 0.0},
                )
            )
    StepMetric.objects.bulk_create(metrics_rows)
    Trajectory.objects.bulk_create(trajectories)


def expected(step: int, component: str) -> list[int]:
    values = [c if component == "correctness" else e for c, e in rewards_of(step)]
    return services.reward_histogram(values)


@pytest.mark.django_db
def test_backfill_carries_component_histograms_with_bounded_queries():
    version = task_version()
    short, long = make_run("short"), make_run("long")
    add_steps(short, version, range(1, 6))
    add_steps(long, version, range(1, 61))
    with CaptureQueriesContext(connection) as few:
        events = selectors.run_backfill_bounded(
            run_id=short.pk, after=0, full_steps=10, max_buckets=4
        )
    with CaptureQueriesContext(connection) as many:
        long_events = selectors.run_backfill_bounded(
            run_id=long.pk, after=0, full_steps=10, max_buckets=4
        )
    # a fixed number of queries however many steps and trajectories: no query per step
    assert len(many.captured_queries) <= len(few.captured_queries) + 2 <= 9, [
        q["sql"][:120] for q in many.captured_queries
    ]

    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3, 4, 5]
    for event in steps:
        assert set(event["components"]) == {"correctness", "efficiency"}
        for name in ("correctness", "efficiency"):
            assert event["components"][name] == expected(event["step"], name), (event["step"], name)
        assert (
            sum(event["components"]["correctness"]) == sum(event["histogram"]) == 8
        )  # the dropped one is not counted
    assert events[0]["kind"] == "status" and events[-1] == {
        "kind": "backfill",
        "steps": 5,
        "decimated": False,
    }

    # the long run: the newest 10 steps in full, the 50 older ones in at most 4 buckets
    long_steps = [e for e in long_events if e["kind"] == "step"]
    buckets = [e for e in long_steps if e.get("decimated")]
    full = [e for e in long_steps if not e.get("decimated")]
    assert [e["step"] for e in full] == list(range(51, 61)) and all("components" in e for e in full)
    assert 1 <= len(buckets) <= 4 and buckets[0]["first_step"] == 1 and buckets[-1]["step"] == 50
    assert sum(b["span"] for b in buckets) == 50
    assert sum(sum(b["histogram"]) for b in buckets) == 50 * 8
    assert all(b["metrics"]["flags/rate"] == pytest.approx(0.125) for b in buckets)
    first = buckets[0]
    assert first["metrics"]["loss/kl"] == pytest.approx(
        sum(s / 1000 for s in range(1, first["step"] + 1)) / first["span"]
    )
    assert long_events[-1] == {"kind": "backfill", "steps": 60, "decimated": True}
    # only the newest steps carry their components; older ones are read through the API when shown
    fewer = selectors.run_backfill_bounded(
        run_id=long.pk, after=0, full_steps=10, max_buckets=4, component_steps=3
    )
    assert [e["step"] for e in fewer if "components" in e] == [58, 59, 60]
    # a reconnect after step 55 gets the 5 newer steps in full, nothing binned
    again = selectors.run_backfill_bounded(run_id=long.pk, after=55, full_steps=10, max_buckets=4)
    assert [e["step"] for e in again if e["kind"] == "step"] == [56, 57, 58, 59, 60]


@pytest.mark.django_db(transaction=True)
def test_live_step_event_reaches_every_watcher_with_component_histograms():
    """A step recorded by ``step_record`` reaches two watchers with its component histograms."""
    version = task_version()
    run = make_run("live")
    spec = TaskSpec(
        task_version_id=version.pk,
        prompt="p",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    rollouts = [
        graded(spec, i, r, reward_components={"correctness": r, "efficiency": 1 - r})
        for i, r in enumerate([0.0, 0.25, 0.5, 1.0])
    ]

    async def watch():
        headers = [(b"origin", b"http://127.0.0.1")]
        watchers = [
            WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=headers)
            for _ in range(2)
        ]
        for watcher in watchers:
            connected, _ = await watcher.connect()
            assert connected
            while (await watcher.receive_json_from(timeout=10))["kind"] != "backfill":
                pass

        # a raw member of the run's group: what the writer broadcast, before any web process
        layer = get_channel_layer()
        raw = await layer.new_channel()
        await layer.group_add(run_group(run.pk), raw)
        await database_sync_to_async(services.step_record)(
            run_id=run.pk,
            step=1,
            rollouts=rollouts,
            metrics={"reward/correctness": 0.44, "reward/efficiency": 0.56},
        )
        received = [await watcher.receive_json_from(timeout=10) for watcher in watchers]
        broadcast = await asyncio.wait_for(layer.receive(raw), 10)
        for watcher in watchers:
            await watcher.disconnect()
        await layer.group_discard(run_group(run.pk), raw)
        return [*received, broadcast["event"]]

    # the writer reads the components once, with the step: the watchers get them as it sent them
    for event in async_to_sync(watch)():
        assert event["kind"] == "step" and event["step"] == 1
        assert event["components"]["correctness"] == [1, 0, 1, 0, 0, 1, 0, 0, 0, 1]
        assert event["components"]["efficiency"] == [1, 0, 0, 0, 0, 1, 0, 1, 0, 1]


@pytest.mark.django_db
def test_components_api_sums_a_span_and_refuses_unbounded_ones():
    version = task_version()
    run = make_run("api")
    add_steps(run, version, range(1, 31))
    client = Client()
    answer = client.get(f"/api/runs/{run.pk}/components/", {"first": 3, "last": 7}).json()
    assert answer["first"] == 3 and answer["last"] == 7
    assert set(answer["steps"]) == {"3", "4", "5", "6", "7"}
    summed = [sum(expected(s, "correctness")[i] for s in range(3, 8)) for i in range(10)]
    assert answer["components"]["correctness"] == summed
    assert (
        "steps"
        not in client.get(
            f"/api/runs/{run.pk}/components/", {"first": 3, "last": 7, "sum": 1}
        ).json()
    )
    assert (
        client.get(f"/api/runs/{run.pk}/components/", {"first": 1, "last": 10**6}).status_code
        == 400
    )
    assert client.get(f"/api/runs/{run.pk}/components/").status_code == 400
    assert client.get("/api/runs/999999/components/", {"first": 1, "last": 2}).status_code == 404


@pytest.mark.django_db
def test_compare_page_puts_runs_on_shared_axes():
    version = task_version()
    a, b = make_run("cmp-a"), make_run("cmp-b")
    add_steps(a, version, range(1, 21), dropped=False)
    add_steps(b, version, range(1, 11), dropped=False)
    HeldOutEvaluation.objects.create(
        run=a,
        step=10,
        task_set=a.task_set,
        tasks=4,
        samples_per_task=4,
        pass_at_k={"1": 0.375, "4": 0.75},
        reward_mean=0.5,
    )
    client = Client()
    page = client.get("/runs/compare/", {"runs": f"{a.pk},{b.pk}"})
    assert page.status_code == 200
    html = page.content.decode()
    for chart in (
        "cmp-reward-mean",
        "cmp-pass-rate",
        "cmp-heldout",
        "cmp-flag-rate",
        "cmp-entropy",
        "cmp-kl",
    ):
        assert f'id="{chart}"' in html
    start = html.index('id="compare-data"')
    data = json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])
    assert [run["id"] for run in data] == [a.pk, b.pk]
    assert data[0]["colour"] != data[1]["colour"]
    assert data[0]["curves"]["step"] == list(range(1, 21)) and data[1]["curves"]["step"] == list(
        range(1, 11)
    )
    assert data[0]["curves"]["heldout_step"] == [10] and data[0]["curves"]["heldout_pass1"] == [
        0.375
    ]
    assert data[1]["curves"]["kl"][-1] == pytest.approx(0.01)
    assert data[0]["curves"]["flag_rate"][0] == pytest.approx(0.125)
    # linked from the run list; a single run gets the picker; an unknown run is a 404
    assert b'id="compare-form"' in client.get("/").content
    assert b'id="compare-picker"' in client.get("/runs/compare/", {"runs": str(a.pk)}).content
    assert client.get("/runs/compare/", {"runs": f"{a.pk},999999"}).status_code == 404
    # the compare page's query count does not grow with the runs' length
    with CaptureQueriesContext(connection) as queries:
        client.get("/runs/compare/", {"runs": f"{a.pk},{b.pk}"})
    add_steps(a, version, range(21, 200), dropped=False)
    with CaptureQueriesContext(connection) as more:
        client.get("/runs/compare/", {"runs": f"{a.pk},{b.pk}"})
    assert len(more.captured_queries) == len(queries.captured_queries)


def test_pool_api_reports_real_workers_queue_latency_and_statuses():
    """Against the session's Redis and resident workers (tests/conftest.py)."""
    good = Q.python_tests(
        "def square(x):\n    return x * x\n",
        "def check(candidate):\n    assert candidate(3) == 9\n",
        "square",
    )
    bad = Q.python_tests(
        "def square(x):\n    return x + x\n",
        "def check(candidate):\n    assert candidate(3) == 9\n",
        "square",
    )
    results = Q.run_many([good, bad, good])
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    time.sleep(0.2)
    response = Client().get("/api/sandboxes/pool/")
    assert response.status_code == 200
    data = response.json()
    assert set(data["runtimes"]) >= {"python", "node"}
    python = data["runtimes"]["python"]
    assert set(python) == {
        "workers",
        "queue_depth",
        "in_flight",
        "recent",
        "latency_ms",
        "wall_ms",
        "statuses",
        "demand",
        "autoscaler",
        "state",
    }
    assert python["demand"]["total"] >= python["demand"]["published"] >= 0
    assert python["autoscaler"] is None  # the session's workers are a fixed pool
    assert set(python["workers"]) == {"alive", "busy", "idle", "dead"}
    assert python["workers"]["alive"] >= 1
    assert python["workers"]["busy"] + python["workers"]["idle"] == python["workers"]["alive"]
    assert python["queue_depth"] >= 0 and python["recent"] >= 3
    assert 0 < python["latency_ms"]["p50"] <= python["latency_ms"]["p99"]
    assert python["wall_ms"]["p50"] > 0
    assert (
        python["statuses"]["python_tests"]["ok"] >= 2
        and python["statuses"]["python_tests"]["failed"] >= 1
    )
    assert data["runtimes"]["node"]["workers"]["alive"] >= 1


@pytest.mark.django_db
def test_pool_page_and_panel_render():
    page = Client().get("/sandboxes/")
    assert (
        page.status_code == 200
        and b'id="sandbox-pool"' in page.content
        and b"pool.js" in page.content
    )


@pytest.mark.django_db
def test_run_page_keeps_its_charts_and_adds_the_new_ones():
    run = make_run("page")
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    for element in (
        "reward-heatmap",
        "reward-mean",
        "step-time",
        "policy-stats",
        "alert-feed",
        "live-state",
        "step-count",
        "reward-dist",
        "dist-slider",
        "dist-mode",
        "dist-component",
        "loss-policy",
        "flag-rate",
        "tokens-rate",
        "sandbox-pool",
    ):
        assert f'id="{element}"' in html, element
