"""Load: the API and console under a fixed request rate, and a big step's ingestion while 200
browsers watch.

On a fresh var dir it seeds a library and a run with history (``--history-steps`` steps of 64
trajectories), starts the console as ``crucible up`` does (daphne,
``console.management.stack.Stack``; a fresh one for each phase, so that one phase's backlog is
not the next one's latency), signs a viewer in (a session cookie, as a browser holds) and measures:

1. **Request load.** An open-loop async client (aiohttp) sends ``--rate`` (200) requests per
   second for ``--seconds`` (60) over loopback, round-robin over the endpoint families: the runs
   API (list, one run, its steps), the trajectories API (``?run=``), the task-library API (task
   versions, task sets), the console's pages (runs list, run page, a run's trajectories, task
   library) and ``/healthz``. Open loop: request *i* leaves at ``i / rate`` whatever the answers
   before it did, so a slow server shows as latency and errors, not as a lower rate. Per family:
   requests, errors (a status >= 400, a timeout of 30 s, a dropped connection; target 0), p50 and
   p99 in milliseconds, and the rate achieved.
2. **Ingestion.** One step of ``--trajectories`` (4,096) trajectories of ``--turns`` (30) turns
   each is written with ``training.services.step_record`` (the trainer's own call: one
   transaction, then the broadcast): turns per second (target >= 5,000 on PostgreSQL). Meanwhile
   ``--clients`` (200) websocket clients watch a second live run that records a small step
   (64 trajectories) every 0.5 s, and the console gets ``--ingest-rate`` (20) page and API
   requests per second: the fan-out's record-to-receipt latency (from the call of
   ``step_record``, which persists the step and then broadcasts it, to each client's receipt; p99
   target < 250 ms) and the console's p99
   while the big step is written.

``--database postgres`` runs the same on PostgreSQL and Redis (``--database-url``, default the
local server's ``postgres://root@127.0.0.1:5432/``, in a database of the benchmark's own, dropped
at the end; ``--redis-url``, default ``redis://127.0.0.1:6379/9``, with a channel prefix of its
own); the default is the embedded one (SQLite and the embedded Redis). No peer: the figures are
held to the targets above, which the JSON reports with ``met``.

Prints one JSON object. Run: ``.venv/bin/python benchmarks/load.py [--database postgres]``
(about three minutes on two cores); ``--quick``: 20 requests per second for 3 s, 64 trajectories
of 30 turns, 10 clients, in seconds, as CI runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from benchmarks.console_streaming import live_run, percentiles, rollouts_for, seed_library

QUICK = {
    "rate": 20.0,
    "seconds": 3.0,
    "trajectories": 64,
    "clients": 10,
    "history_steps": 3,
    "ingest_rate": 5.0,
}
REQUEST_TIMEOUT_S = 30.0
LIVE_PERIOD_S = 0.5
LIVE_TRAJECTORIES = 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the request load")
    parser.add_argument("--trajectories", type=int, default=4096, help="of the ingested step")
    parser.add_argument("--turns", type=int, default=30, help="per ingested trajectory")
    parser.add_argument("--clients", type=int, default=200, help="websocket clients")
    parser.add_argument("--ingest-rate", type=float, default=20.0, help="console requests/s then")
    parser.add_argument("--history-steps", type=int, default=20, help="of the seeded run")
    parser.add_argument("--database", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--database-url", default="postgres://root@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--var-dir", default="", help="keep the var dir here (default: temporary)")
    return common.parse_args(parser, QUICK)


# --- PostgreSQL: a database of the benchmark's own --------------------------------------------


def _with_db(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _admin(url: str, sql: str) -> None:
    import psycopg  # noqa: PLC0415 (only the postgres mode needs it)

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


# --- data -------------------------------------------------------------------------------------


def many_turns(rollouts: list, turns: int) -> list:
    """``rollouts`` with ``turns`` turns each (the first one repeated, as a long episode reads)."""
    from training.agents.trajectory import AgentTrajectory  # noqa: PLC0415 (after django.setup)

    for rollout in rollouts:
        first = rollout.turns[0]
        repeated = [dataclasses.replace(first, index=index) for index in range(turns)]
        rollout.trajectory = AgentTrajectory.of(rollout.prompt_ids, repeated)
    return rollouts


def seed(args) -> dict:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY  # noqa: PLC0415
    from django.contrib.auth.models import Group, User  # noqa: PLC0415
    from django.contrib.sessions.backends.db import SessionStore  # noqa: PLC0415

    from tasks_library.management.commands.create_user import ROLES  # noqa: PLC0415
    from training import services  # noqa: PLC0415

    task_set, version = seed_library()
    history = live_run(task_set)
    for step in range(1, args.history_steps + 1):
        services.step_record(
            run_id=history.pk,
            step=step,
            rollouts=rollouts_for(version, step, 64),
            metrics={"loss/policy": 0.1},
        )
    user = User.objects.create_user("load-viewer", password=uuid.uuid4().hex)
    user.groups.add(Group.objects.get(name=ROLES["viewer"]))
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return {
        "task_set": task_set,
        "version": version,
        "history": history,
        "cookie": session.session_key,
    }


def families(run_id: int) -> dict[str, list[str]]:
    """Endpoint family -> the paths requested round-robin in it."""
    return {
        "api_runs": ["/api/runs/", f"/api/runs/{run_id}/", f"/api/runs/{run_id}/steps/"],
        "api_trajectories": [f"/api/trajectories/?run={run_id}"],
        "api_tasks": ["/api/task-versions/", "/api/task-sets/"],
        "console_pages": ["/", f"/runs/{run_id}/", f"/runs/{run_id}/trajectories/", "/tasks/"],
        "healthz": ["/healthz"],
    }


# --- request load -----------------------------------------------------------------------------


async def request_load(
    base: str,
    cookie: str,
    paths: dict,
    *,
    rate: float,
    seconds: float,
    stop: asyncio.Event | None = None,
) -> dict:
    """Open-loop requests at ``rate`` per second for ``seconds`` (or until ``stop`` is set); per
    family: requests, errors, p50 and p99 in milliseconds."""
    schedule = [(family, path) for family, items in paths.items() for path in items]
    results: dict[str, list[tuple[float, str | None]]] = {family: [] for family in paths}
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        base, cookies={"sessionid": cookie}, timeout=timeout, connector=connector
    ) as session:

        async def one(family: str, path: str) -> None:
            started = time.perf_counter()
            error = None
            try:
                async with session.get(path, allow_redirects=False) as response:
                    await response.read()
                    if response.status >= 400:
                        error = f"HTTP {response.status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = type(exc).__name__
            results[family].append(((time.perf_counter() - started) * 1000, error))

        start = time.perf_counter()
        tasks = []
        while len(tasks) < max(1, int(rate * seconds)) and not (stop and stop.is_set()):
            await asyncio.sleep(max(0.0, start + len(tasks) / rate - time.perf_counter()))
            family, path = schedule[len(tasks) % len(schedule)]
            tasks.append(asyncio.create_task(one(family, path)))
        total = len(tasks)
        sent_s = time.perf_counter() - start
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    out = {}
    for family, rows in results.items():
        errors = [error for _ms, error in rows if error]
        out[family] = {
            "requests": len(rows),
            "errors": len(errors),
            "error_kinds": sorted(set(errors)),
            "latency_ms": percentiles([ms for ms, _error in rows]),
        }
    return {
        "rate_target_per_s": rate,
        "rate_sent_per_s": round(total / sent_s, 1) if sent_s else None,
        "seconds": round(elapsed, 1),
        "requests": total,
        "errors": sum(family["errors"] for family in out.values()),
        "families": out,
    }


async def unloaded(base: str, cookie: str, paths: dict, *, repeat: int = 5) -> dict:
    """Each path's median latency in milliseconds, one request at a time (the cost of a request
    with no queue in front of it: what bounds the rate the server sustains)."""
    out = {}
    async with aiohttp.ClientSession(base, cookies={"sessionid": cookie}) as session:
        for path in (path for items in paths.values() for path in items):
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                async with session.get(path, allow_redirects=False) as response:
                    await response.read()
                times.append((time.perf_counter() - started) * 1000)
            out[path] = round(sorted(times)[len(times) // 2], 1)
    return out


# --- ingestion while the console is watched ---------------------------------------------------


async def ingestion(base: str, cookie: str, data: dict, args) -> dict:
    from django.db import connection  # noqa: PLC0415 (after django.setup)

    from training import services  # noqa: PLC0415 (after django.setup)

    big, live, version = data["big"], data["live"], data["version"]
    rollouts = many_turns(rollouts_for(version, 1, args.trajectories), args.turns)
    persisted: dict[int, float] = {}
    receipts: list[tuple[int, float]] = []
    connected = [0]
    ready = asyncio.Event()
    stop = threading.Event()
    ingest: dict = {}
    ws_url = base.replace("http://", "ws://") + f"/ws/runs/{live.pk}/"

    failed: list[str] = []

    def settled() -> None:
        if connected[0] + len(failed) == args.clients:
            ready.set()

    async def client(session):
        try:
            async with session.ws_connect(ws_url, headers={"Origin": base}, max_msg_size=0) as ws:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.TEXT:
                        break
                    now = time.perf_counter()
                    event = json.loads(message.data)
                    if event.get("kind") == "backfill":
                        connected[0] += 1
                        settled()
                    elif event.get("kind") == "step":
                        receipts.append((event["step"], now))
        except (aiohttp.ClientError, TimeoutError) as exc:
            failed.append(type(exc).__name__)
            settled()

    def live_steps():
        """The watched run: a small step every LIVE_PERIOD_S until the big one is written."""
        try:
            step = 0
            while not stop.is_set():
                step += 1
                small = rollouts_for(version, step, LIVE_TRAJECTORIES)
                # timed from the call: step_record broadcasts right after its commit, before it
                # returns, so a receipt can precede its return (a negative latency); the figure
                # is an upper bound that includes the step's own write
                persisted[step] = time.perf_counter()
                services.step_record(run_id=live.pk, step=step, rollouts=small, metrics={})
                stop.wait(LIVE_PERIOD_S)
        finally:
            connection.close()

    def big_step():
        try:
            started = time.perf_counter()
            services.step_record(run_id=big.pk, step=1, rollouts=rollouts, metrics={})
            ingest["seconds"] = time.perf_counter() - started
        finally:
            connection.close()

    # limit=0: aiohttp holds a websocket's connection for its life, and its default pool of 100
    # would leave the 101st client waiting
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        watchers = [asyncio.create_task(client(session)) for _ in range(args.clients)]
        connect_started = time.perf_counter()
        try:
            await asyncio.wait_for(ready.wait(), timeout=120)
        except TimeoutError:
            pass  # measured with the clients that did connect; the JSON says how many
        connect_s = time.perf_counter() - connect_started
        live_thread = threading.Thread(target=live_steps, name="live-steps")
        live_thread.start()
        writer = asyncio.create_task(asyncio.to_thread(big_step))
        written = asyncio.Event()
        console = asyncio.create_task(
            request_load(
                base,
                cookie,
                families(data["history"].pk),
                rate=args.ingest_rate,
                seconds=3600,
                stop=written,
            )
        )
        await writer
        written.set()
        stop.set()
        during = await console
        await asyncio.to_thread(live_thread.join)
        await asyncio.sleep(1.0)  # the last live step's receipts
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    turns = args.trajectories * args.turns
    fanout = [(now - persisted[step]) * 1000 for step, now in receipts if step in persisted]
    figures = percentiles(fanout)
    return {
        "trajectories": args.trajectories,
        "turns_per_trajectory": args.turns,
        "turns": turns,
        "step_record_s": round(ingest["seconds"], 2),
        "turns_per_s": round(turns / ingest["seconds"], 1),
        "target_turns_per_s": 5000,
        "console_during": during,
        "fanout": {
            "clients": args.clients,
            "clients_connected": connected[0],
            "clients_failed": sorted(set(failed)),
            "connect_all_s": round(connect_s, 2),
            "live_steps": len(persisted),
            "events_expected": args.clients * len(persisted),
            "events_received": len(fanout),
            "record_to_receipt_ms": figures,
            "target_p99_ms": 250,
            "met": bool(figures["p99"] is not None and figures["p99"] < 250),
        },
    }


def main() -> None:
    args = parse_args()
    os.environ.setdefault("CRUCIBLE_CHANNEL_PREFIX", f"load{os.getpid()}")
    database_url = ""
    if args.database == "postgres":
        database_url = _with_db(args.database_url, f"crucible_load_{os.getpid()}")
        _admin(args.database_url, f'CREATE DATABASE "{urlsplit(database_url).path[1:]}"')
        os.environ["REDIS_URL"] = args.redis_url
    try:
        with common.private_var_dir(
            args.var_dir, keep_redis_url=bool(database_url), database_url=database_url
        ) as var:
            out = run(args, var)
    finally:
        if database_url:
            from django.db import connections  # noqa: PLC0415 (after django.setup)

            connections.close_all()
            _admin(
                args.database_url,
                f'DROP DATABASE IF EXISTS "{urlsplit(database_url).path[1:]}" WITH (FORCE)',
            )
    print(json.dumps(out, indent=2))


def run(args, var: Path) -> dict:
    from django.conf import settings  # noqa: PLC0415 (after django.setup)
    from django.db import connection  # noqa: PLC0415

    from console.management.stack import Stack, port_free  # noqa: PLC0415

    out: dict = {
        "benchmark": "load",
        "quick": args.quick,
        "cpus": os.cpu_count(),
        "database": connection.vendor,
        "redis": "embedded" if settings.EMBEDDED_REDIS else "REDIS_URL",
        "var_dir": str(var) if args.var_dir else f"{var} (removed)",
    }
    with Stack() as stack:
        stack.redis()
        data = seed(args)
        paths = families(data["history"].pk)
        # A console of its own for each phase: an overloaded one's backlog (requests whose
        # clients gave up long ago) must not be measured as the next phase's latency.
        with Stack() as web:
            base = web.web(next(p for p in range(8410, 8500) if port_free(p)))
            out["unloaded_ms"] = asyncio.run(unloaded(base, data["cookie"], paths))
            requests = asyncio.run(
                request_load(base, data["cookie"], paths, rate=args.rate, seconds=args.seconds)
            )
        requests["met"] = requests["errors"] == 0
        out["requests"] = requests
        # on stderr at once: kept should the ingestion phase fail
        print(json.dumps({"requests": requests}), file=sys.stderr, flush=True)
        data["big"], data["live"] = live_run(data["task_set"]), live_run(data["task_set"])
        with Stack() as web:
            base = web.web(next(p for p in range(8410, 8500) if port_free(p)))
            out["ingestion"] = asyncio.run(ingestion(base, data["cookie"], data, args))
    out["ingestion"]["met_turns_per_s"] = out["ingestion"]["turns_per_s"] >= 5000
    return out


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
