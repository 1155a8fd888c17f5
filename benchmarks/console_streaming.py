"""Console streaming: live event latency to many browsers, and a long run's first load.

On a fresh var dir (its own SQLite file and, unless ``REDIS_URL`` is set, its own embedded
Redis) it starts the console as ``crucible up`` does (daphne,
``console.management.stack.Stack.web``) and:

1. **Streaming.** Opens ``--clients`` (200) concurrent websocket clients (aiohttp) on one live
   run, then records ``--steps`` steps with ``training.services.step_record`` (64 trajectories
   with two reward components and one turn each, as a trainer step writes them) at
   ``--rate`` steps per second. Latency is from the call of ``step_record`` (persist, then
   broadcast) to the step event's receipt by each client, including the per-component
   histograms the consumer adds; p50/p90/p99/max over every (client, step). Target p99 < 250 ms.
   ``after_persist_ms`` starts when the step's event is broadcast, after its commit: the
   fan-out alone. On SQLite the recorder's commit checkpoints the write-ahead log every ~1000
   pages (an fsync: hundreds of ms on a slow disk, one step in ~25), so the same run is
   repeated with ``PRAGMA wal_autocheckpoint=0`` on the recorder's connection
   (``streaming_without_checkpoint_stalls``) to show what the checkpoint costs.
2. **First load.** A run with ``--big-steps`` (10,000) steps and ``--big-trajectories``
   (1,000,000) trajectories (inserted in bulk with minimal fields): the run page's HTML plus
   the websocket back-fill up to its closing marker, as a browser does; target < 1 s. The
   back-fill is bounded (``training.selectors.run_backfill_bounded``: the newest 300 steps in
   full, the newest 60 of them with component histograms, older ones summed into at most 300
   buckets). There is no outside peer here: the comparison is an **ablation** of Crucible itself,
   the undecimated back-fill (``training.selectors.run_backfill``, every step, no component
   histograms), both measured in process on the same database (selector plus one JSON text per
   event, as the consumer sends them), and the ratios are ablation / ours. Query
   counts come from Django's ``CaptureQueriesContext`` in process.

``--database postgres`` runs it on PostgreSQL and Redis (``--database-url``, default the local
server's, in a database of the benchmark's own, dropped at the end; ``--redis-url``), the seed
written with ``COPY``; ``--first-load-only`` skips the live phases (for a run of 100,000 steps
and 10,000,000 trajectories: ``--big-steps 100000 --big-trajectories 10000000``).

Prints one JSON object. Run: ``.venv/bin/python benchmarks/console_streaming.py`` (about two
minutes on two cores; ``--big-trajectories 100000`` for a quicker look; ``--quick``: 20
clients, 5 steps, a run of 600 steps and 6,000 trajectories, in seconds, as CI runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import aiohttp
from django.conf import settings
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack, port_free
from training.config import RunConfig

# Django's models load once common.private_var_dir has set Django up on the benchmark's own var
# dir (in main): the imports of what uses them stand in the functions.

QUICK = {
    "clients": 20,
    "steps": 5,
    "rate": 5.0,
    "trajectories_per_step": 16,
    "big_steps": 600,  # more than BACKFILL_FULL_STEPS: older steps are still summed into buckets
    "big_trajectories": 6000,
    "loads": 2,
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument(
        "--steps", type=int, default=30, help="live steps recorded while the clients watch"
    )
    parser.add_argument("--rate", type=float, default=2.0, help="live steps per second")
    parser.add_argument("--trajectories-per-step", type=int, default=64)
    parser.add_argument("--big-steps", type=int, default=10_000)
    parser.add_argument("--big-trajectories", type=int, default=1_000_000)
    parser.add_argument(
        "--loads", type=int, default=3, help="first loads measured (the first is cold)"
    )
    parser.add_argument(
        "--var-dir", default="", help="default: a fresh temporary directory, removed at the end"
    )
    parser.add_argument("--database", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--database-url", default="postgres://root@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument(
        "--first-load-only", action="store_true", help="skip the live streaming phases"
    )
    return common.parse_args(parser, QUICK)


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))], 2)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": round(ordered[-1], 2)}


# --- data -------------------------------------------------------------------------------

COMPONENT_VARIANTS = 64


def seed_library():
    from tasks_library.models import (  # noqa: PLC0415 (models: after django.setup)
        EnvironmentVersion,
        Task,
        TaskVersion,
        TestSuiteVersion,
    )
    from tasks_library.services import task_set_pin  # noqa: PLC0415 (models: after django.setup)

    env = EnvironmentVersion.objects.create(
        content_hash="e" * 64, name="python", runtime="python3.11"
    )
    suite = TestSuiteVersion.objects.create(
        content_hash="s" * 64, visible_tests="", hidden_tests="def check(c):\n    pass\n"
    )
    task = Task.objects.create(task_id="Bench/0", source="bench")
    version = TaskVersion.objects.create(
        task=task,
        number=1,
        content_hash="b" * 64,
        prompt="p",
        entry_point="f",
        reference_solution="r",
        environment=env,
        test_suite=suite,
        verdict="valid",
    )
    return task_set_pin(name="bench", versions=[version], author="bench"), version


def step_metrics(step: int, steps: int) -> dict:
    """A trainer step's metrics (the same keys training/trainer.py records)."""
    progress = step / max(1, steps)
    return {
        "reward/mean": 0.2 + 0.6 * progress,
        "reward/pass_rate": 0.1 + 0.6 * progress,
        "reward/correctness": 0.2 + 0.6 * progress,
        "reward/efficiency": 0.5,
        "flags/rate": 0.02,
        "rollouts/dropped": 0,
        "rollouts/timeout": 0,
        "rollouts/replay_queue": 0,
        "sampler/groups_skipped": 0,
        "rollouts/turns_mean": 1.6,
        "timing/generation_s": 3.1,
        "timing/sandbox_s": 0.8,
        "timing/sandbox_busy_s": 1.9,
        "timing/grading_s": 0.7,
        "timing/update_s": 1.2,
        "tokens/generated": 12000,
        "groups/zero_advantage": 1,
        "groups/total": 8,
        "tokens/trained": 11000,
        "loss/policy": 0.01,
        "loss/kl": 0.001 * progress,
        "policy/entropy": 2.0 - progress,
        "policy/clip_fraction": 0.05,
        "policy/grad_norm": 0.8,
        "policy/lr": 2e-4,
    }


def seed_big_run(task_set, version, *, steps: int, trajectories: int) -> tuple[int, dict]:
    """A finished run of ``steps`` steps and ``trajectories`` trajectories, inserted in bulk."""
    from training.models import (  # noqa: PLC0415 (models: after django.setup)
        StepMetric,
        TrainingRun,
        Trajectory,
    )
    from training.services import (  # noqa: PLC0415 (models: after django.setup)
        REWARD_BINS,
        reward_histogram,
    )

    run = TrainingRun.objects.create(
        task_set=task_set,
        total_steps=steps,
        status=TrainingRun.SUCCEEDED,
        config={"reward_weights": {"correctness": 1.0, "efficiency": 0.5}},
    )
    per_step = max(1, trajectories // steps)
    rng = random.Random(0)
    started = time.perf_counter()
    variants = []
    for _ in range(COMPONENT_VARIANTS):
        c, e = round(rng.random(), 3), round(rng.random(), 3)
        variants.append(((c + 0.5 * e) / 1.5, json.dumps({"correctness": c, "efficiency": e})))
    now = timezone.now().isoformat()
    bins = json.dumps(REWARD_BINS)
    step_rows = []
    for step in range(1, steps + 1):
        rewards = [variants[(step * 7 + i) % COMPONENT_VARIANTS][0] for i in range(per_step)]
        mean = sum(rewards) / len(rewards)
        step_rows.append(
            (
                run.pk,
                step,
                "rl",
                mean,
                json.dumps(reward_histogram(rewards)),
                bins,
                json.dumps(step_metrics(step, steps)),
                now,
            )
        )
    with transaction.atomic(), connection.cursor() as cursor:
        insert_rows(
            cursor,
            StepMetric,
            [
                "run",
                "step",
                "phase",
                "reward_mean",
                "reward_histogram",
                "reward_bins",
                "metrics",
                "recorded_at",
            ],
            step_rows,
        )

        def rows():
            for step in range(1, steps + 1):
                for i in range(per_step):
                    reward, components = variants[(step * 7 + i) % COMPONENT_VARIANTS]
                    yield (
                        run.pk,
                        step,
                        i // 8,
                        i % 8,
                        version.pk,
                        "ok",
                        reward,
                        components,
                        int(reward * 4),
                        4,
                        now,
                    )

        insert_rows(
            cursor,
            Trajectory,
            [
                "run",
                "step",
                "group",
                "index_in_group",
                "task_version",
                "status",
                "reward",
                "reward_components",
                "tests_passed",
                "tests_total",
                "created_at",
            ],
            rows(),
        )
    return run.pk, {
        "steps": steps,
        "trajectories": per_step * steps,
        "seed_s": round(time.perf_counter() - started, 2),
    }


def insert_rows(cursor, model, fields: list[str], rows) -> None:
    """``rows`` (values of ``fields``, ready for the database) into ``model``'s table: ``COPY``
    on PostgreSQL, ``executemany`` on SQLite; every other column gets its field's default, so
    that a migration adding a column with a default leaves the seed working
    (``StepMetric.timeline`` once broke it).

    Raises:
        RuntimeError: a column that is NOT NULL has neither a value here nor a default.
    """
    meta = model._meta
    columns = [meta.get_field(name).column for name in fields]
    rest = []
    for field in meta.concrete_fields:
        if field.primary_key or field.column in columns:
            continue
        value = field.get_default()  # as Django's own INSERT: "" for text without a default
        if value is None and not field.null:
            raise RuntimeError(
                f"{meta.label}.{field.name} has no default: the seed must give it a value"
            )
        rest.append(
            (field.column, None if value is None else field.get_db_prep_save(value, connection))
        )
    columns += [column for column, _ in rest]
    tail = tuple(value for _, value in rest)
    quote = connection.ops.quote_name
    names = ", ".join(quote(c) for c in columns)
    if connection.vendor == "postgresql":  # COPY: millions of rows in a minute
        with cursor.cursor.copy(f"COPY {quote(meta.db_table)} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(tuple(row) + tail)
        return
    cursor.executemany(
        f"INSERT INTO {quote(meta.db_table)} ({names}) VALUES ({', '.join(['%s'] * len(columns))})",
        (tuple(row) + tail for row in rows),
    )


def live_run(task_set):
    from training import services  # noqa: PLC0415 (models: after django.setup)

    run = services.run_create(
        task_set=task_set,
        config=RunConfig.from_dict(
            {"steps": 100000, "reward_weights": {"correctness": 1.0, "efficiency": 0.5}}
        ),
    )
    services.run_transition(run_id=run.pk, to_status="launching")
    services.run_transition(run_id=run.pk, to_status="running")
    return run


def rollouts_for(version, step: int, count: int) -> list:
    from sandboxes.result import ExecutionResult  # noqa: PLC0415 (models: after django.setup)
    from training.agents.completion import completion_turn  # noqa: PLC0415
    from training.agents.trajectory import AgentTrajectory  # noqa: PLC0415
    from training.rollout import Rollout, TaskSpec  # noqa: PLC0415

    spec = TaskSpec(
        task_version_id=version.pk,
        prompt="p",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    out = []
    for i in range(count):
        c = ((i * 37 + step * 11) % 100) / 100
        e = ((i * 53 + step * 5) % 100) / 100
        out.append(
            Rollout(
                task=spec,
                group=i // 8,
                index_in_group=i % 8,
                trajectory=AgentTrajectory.of(
                    [1, 2, 3],
                    [
                        completion_turn(
                            0,
                            [5, 6, 7],
                            [-0.1, -0.2, -0.3],
                            text="def f():\n    return 1\n",
                            code="def f():\n    return 1\n",
                            result=ExecutionResult(status="ok"),
                            feedback="ok",
                        )
                    ],
                ),
                status="ok",
                reward=(c + 0.5 * e) / 1.5,
                tests_passed=int(c * 4),
                tests_total=4,
                reward_components={"correctness": c, "efficiency": e},
            )
        )
    return out


# --- streaming ------------------------------------------------------------------------------


async def stream(base: str, run_id: int, version, args, *, autocheckpoint: bool = True) -> dict:
    from training import services  # noqa: PLC0415 (models: after django.setup)

    ws_url = base.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    recorded: dict[int, float] = {}
    record_ms: list[float] = []
    persisted: dict[int, float] = {}
    receipts: list[tuple[int, float]] = []
    latencies: list[float] = []
    by_step: dict[int, list[float]] = {}
    received = [0]
    ready = asyncio.Event()
    connected = [0]
    done = asyncio.Event()

    async def client(session):
        async with session.ws_connect(
            ws_url, headers={"Origin": base}, max_msg_size=0, autoping=True
        ) as ws:
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                now = time.perf_counter()
                event = json.loads(message.data)
                kind = event.get("kind")
                if kind == "backfill":
                    connected[0] += 1
                    if connected[0] == args.clients:
                        ready.set()
                elif kind == "step" and event["step"] in recorded:
                    latencies.append((now - recorded[event["step"]]) * 1000)
                    receipts.append((event["step"], now))
                    by_step.setdefault(event["step"], []).append(latencies[-1])
                    received[0] += 1
                    if "components" not in event or not event["components"]:
                        raise AssertionError(
                            f"step {event['step']} came without component histograms"
                        )
                    if received[0] == args.clients * args.steps:
                        done.set()

    # The moment each step's event leaves step_record, after its commit: the fan-out counts
    # from there (a receipt can come before step_record returns).
    original_broadcast = services.broadcast_run_event

    def timed_broadcast(target_run, event):
        if target_run == run_id and event.get("kind") == "step":
            persisted[event["step"]] = time.perf_counter()
        original_broadcast(target_run, event)

    def record_steps():
        services.broadcast_run_event = timed_broadcast
        try:
            if not autocheckpoint and connection.vendor == "sqlite":
                with connection.cursor() as cursor:  # this connection's commits never checkpoint
                    cursor.execute("PRAGMA wal_autocheckpoint=0")
            period = 1.0 / args.rate
            start = time.perf_counter()
            for step in range(1, args.steps + 1):
                target = start + (step - 1) * period
                time.sleep(max(0.0, target - time.perf_counter()))
                rollouts = rollouts_for(version, step, args.trajectories_per_step)
                recorded[step] = time.perf_counter()
                services.step_record(
                    run_id=run_id,
                    step=step,
                    rollouts=rollouts,
                    metrics=step_metrics(step, args.steps),
                )
                record_ms.append((time.perf_counter() - recorded[step]) * 1000)
        finally:
            services.broadcast_run_event = original_broadcast
            connection.close()

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        tasks = [asyncio.create_task(client(session)) for _ in range(args.clients)]
        await asyncio.wait_for(ready.wait(), timeout=120)
        connect_s = time.perf_counter() - started
        record_started = time.perf_counter()
        await asyncio.to_thread(record_steps)
        record_s = time.perf_counter() - record_started
        try:
            await asyncio.wait_for(done.wait(), timeout=30)
        except TimeoutError:
            pass
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    expected = args.clients * args.steps
    figures = percentiles(latencies)
    result = {
        "clients": args.clients,
        "steps": args.steps,
        "rate_per_s": args.rate,
        "trajectories_per_step": args.trajectories_per_step,
        "connect_all_s": round(connect_s, 2),
        "record_s": round(record_s, 2),
        "events_expected": expected,
        "events_received": len(latencies),
        "latency_ms": figures,
        "target_p99_ms": 250,
        # where the time goes: step_record itself (persist + broadcast), the first and the last
        # of the clients to get each step (the spread is the fan-out: server and clients)
        "sqlite_wal_autocheckpoint_in_recorder": autocheckpoint,
        "step_record_ms": percentiles(record_ms),
        "step_record_slowest": [
            {"step": i + 1, "ms": round(v, 1)}
            for i, v in sorted(enumerate(record_ms), key=lambda item: -item[1])[:3]
        ],
        "first_client_ms": percentiles([min(v) for v in by_step.values()]),
        "last_client_ms": percentiles([max(v) for v in by_step.values()]),
        # from the step event's broadcast (after the commit) to receipt: the fan-out alone
        "after_persist_ms": percentiles(
            [(now - persisted[step]) * 1000 for step, now in receipts if step in persisted]
        ),
        "ok": len(latencies) == expected and figures["p99"] is not None and figures["p99"] < 250,
    }
    after = [(now - persisted[step]) * 1000 for step, now in receipts if step in persisted]
    result["ok_after_persist"] = len(after) == expected and percentiles(after)["p99"] < 250
    return result


# --- first load -----------------------------------------------------------------------------


async def first_load(base: str, run_id: int) -> dict:
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        async with session.get(f"{base}/runs/{run_id}/") as response:
            html = await response.read()
            assert response.status == 200, response.status
        html_s = time.perf_counter() - started
        events = size = 0
        ws_started = time.perf_counter()
        async with session.ws_connect(
            base.replace("http://", "ws://") + f"/ws/runs/{run_id}/?after=0",
            headers={"Origin": base},
            max_msg_size=0,
        ) as ws:
            async for message in ws:
                events += 1
                size += len(message.data)
                if json.loads(message.data).get("kind") == "backfill":
                    break
        backfill_s = time.perf_counter() - ws_started
    return {
        "html_ms": round(html_s * 1000, 1),
        "html_bytes": len(html),
        "backfill_ms": round(backfill_s * 1000, 1),
        "backfill_events": events,
        "backfill_bytes": size,
        "total_ms": round((html_s + backfill_s) * 1000, 1),
    }


def in_process_figures(run_id: int) -> dict:
    """Query counts (CaptureQueriesContext) and timings of the page and both back-fills, in
    process."""
    from training import selectors  # noqa: PLC0415 (models: after django.setup)

    client = Client(HTTP_HOST="127.0.0.1")
    with CaptureQueriesContext(connection) as page_queries:
        assert client.get(f"/runs/{run_id}/").status_code == 200
    # each: the selector, then one JSON text per event (what the consumer sends)
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as ours_queries:
        ours = selectors.run_backfill_bounded(run_id=run_id, after=0)
    ours_bytes = sum(len(json.dumps(e)) for e in ours)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as ablation_queries:
        ablation = selectors.run_backfill(run_id=run_id, after=0)
    ablation_bytes = sum(len(json.dumps(e)) for e in ablation)
    ablation_s = time.perf_counter() - started
    return {
        "html_queries": len(page_queries.captured_queries),
        "backfill": {
            "queries": len(ours_queries.captured_queries),
            "ms": round(ours_s * 1000, 1),
            "events": len(ours),
            "bytes": ours_bytes,
            "full_steps": selectors.BACKFILL_FULL_STEPS,
            "max_buckets": selectors.BACKFILL_MAX_BUCKETS,
            "component_steps": selectors.BACKFILL_COMPONENT_STEPS,
            "buckets": sum(1 for e in ours if e.get("decimated")),
            "with_component_histograms": sum(1 for e in ours if "components" in e),
        },
        "ablation_undecimated_backfill": {
            "queries": len(ablation_queries.captured_queries),
            "ms": round(ablation_s * 1000, 1),
            "events": len(ablation),
            "bytes": ablation_bytes,
            "with_component_histograms": 0,
        },
        "ratio_bytes_ablation_over_ours": round(ablation_bytes / max(1, ours_bytes), 1),
        "ratio_ms_ablation_over_ours": round(ablation_s / max(1e-9, ours_s), 2),
    }


def main() -> None:
    args = parse_args()
    os.environ.setdefault("CRUCIBLE_CHANNEL_PREFIX", f"bench{os.getpid()}")
    with common.profile_database(args, f"crucible_streaming_{os.getpid()}") as database_url:
        out = measure(args, database_url)
    print(json.dumps(out, indent=2))


def measure(args, database_url: str) -> dict:
    with common.private_var_dir(
        args.var_dir, keep_redis_url=bool(database_url), database_url=database_url
    ) as var:
        out: dict = {
            "benchmark": "console_streaming",
            "quick": args.quick,
            "cpus": os.cpu_count(),
            "database": connection.vendor,
            "redis": "embedded" if settings.EMBEDDED_REDIS else "REDIS_URL",
            "var_dir": str(var) if args.var_dir else f"{var} (removed)",
        }
        with Stack() as stack:
            stack.redis()
            task_set, version = seed_library()
            big_id, big = seed_big_run(
                task_set, version, steps=args.big_steps, trajectories=args.big_trajectories
            )
            live, second = live_run(task_set), live_run(task_set)
            with connection.cursor() as cursor:  # fold the seed's write-ahead log in first
                if connection.vendor == "sqlite":
                    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                else:
                    cursor.execute("ANALYZE")  # as autovacuum would have, long before a reader
            port = next(p for p in range(8310, 8400) if port_free(p))
            base = stack.web(port)
            if not args.first_load_only:
                out["streaming"] = asyncio.run(stream(base, live.pk, version, args))
            if not args.first_load_only and connection.vendor == "sqlite":
                # the same, with the recorder's SQLite connection never checkpointing its
                # write-ahead log in a commit (as when a maintenance task checkpoints off the
                # trainer's path): what is left is the console's own streaming cost
                out["streaming_without_checkpoint_stalls"] = asyncio.run(
                    stream(base, second.pk, version, args, autocheckpoint=False)
                )
            loads = [asyncio.run(first_load(base, big_id)) for _ in range(max(1, args.loads))]
        figures = in_process_figures(big_id)
    warm = loads[1:] or loads
    out["first_load"] = {
        **big,
        "cold": loads[0],
        "warm_median_total_ms": statistics.median(load["total_ms"] for load in warm),
        "html_queries": figures.pop("html_queries"),
        "target_ms": 1000,
        "ok": loads[0]["total_ms"] < 1000 and all(load["total_ms"] < 1000 for load in warm),
        **figures,
    }
    return out


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
