"""Load: the API and console under a fixed request rate, and a big step's ingestion while 1,000
websocket clients watch.

On a fresh var dir it seeds a library and a run with history (``--history-steps`` steps of 64
trajectories), starts the console as ``crucible up`` does (granian in one worker process per CPU,
``console.management.stack.Stack``; ``--server`` picks uvicorn, gunicorn with uvicorn workers or
daphne instead, for comparison; a fresh server for each load, so that one load's backlog is not
the next one's latency), signs ``--viewers`` (20) viewers in (each with a session cookie and a
CSRF cookie, as a browser holds them: the console's micro-cache keeps answers per viewer, so
one viewer would flatter it) and measures:

1. **Request load.** wrk, in a process of its own (``load_wrk.lua``; its own CPU use is reported
   as ``generator_cpu``, beside the server's, ``server_cpu``: CPU seconds and cores), sends GET
   requests on an open-loop schedule over loopback, round-robin over the endpoint families: the
   runs API (list, one run, its steps), the trajectories API (``?run=``), the task-library API
   (task versions, task sets), the console's pages (runs list, run page, a run's trajectories,
   task library) and ``/healthz``. Open loop: request *i* is due at ``i / rate`` whatever the
   answers before it did, and its latency counts from then, so a slow server shows as latency
   and errors, not as a lower rate. First a ramp (``--ramp``: 50, 75, 100, 150, 200, 300, 400,
   600 requests per second, ``--ramp-seconds`` (20) each, stopped at the first rate with an
   error): ``highest_rate_without_errors``; then ``--rate`` (400) for ``--seconds`` (60), held to
   the target (0 errors, p99 < 1,000 ms). Per family: requests, cache hits (answered by the
   console's micro-cache, ``X-Crucible-Cache: hit``), errors (a status >= 400, the
   server's 503 past capacity included; a request not answered within 10 s; a request due that
   wrk could not send), p50 and p99 in milliseconds from the due time (``latency_ms``) and from
   the send (``service_ms``); ``errors_by_second``, when the errors were due. The console's
   micro-cache (``core/response_cache.py``) is on, as ``up`` runs it; ``--response-cache-ms 0``
   sends every request through Django (the ablation). Each load starts on a fresh, cold server;
   ``--warmup-seconds N`` first runs the same load for N seconds on it and reports that apart
   (``warmup``: a cold cache's first seconds, as after a restart), then measures.
2. **Ingestion.** One step of ``--trajectories`` (1,024) agent trajectories of ``--turns``
   (30-60, drawn per trajectory) turns, each turn a ``run_tests`` tool call with 0.5-8 KB of
   pytest-like output, is written with ``training.services.step_record`` (the trainer's own call:
   one transaction, then the broadcast): turns per second (target >= 10,000 on PostgreSQL,
   >= 5,000 on SQLite). Meanwhile ``--clients`` (1,000) websocket clients, in a process of their
   own (``benchmarks/ws_watchers.py``), watch a second live run whose trainer, a process of its
   own too (``benchmarks/live_steps.py``, as a team's trainers are), records a small step (64
   trajectories) every 0.5 s, and the console gets ``--ingest-rate`` (20) page and API requests
   per second (wrk): the fan-out's latency, from the step event's broadcast (right after the
   live step's commit) to each client's receipt (``broadcast_to_receipt_ms``, p99 target < 250
   ms), beside the latency from the call of ``step_record`` (``record_to_receipt_ms``: the live
   step's own write too, which on SQLite waits for the big step's transaction: one writer at a
   time), and the console's p99 while the big step is written.

``--database postgres`` runs the same on PostgreSQL and Redis (``--database-url``, default the
local server's ``postgres://root@127.0.0.1:5432/``, in a database of the benchmark's own, dropped
at the end; ``--redis-url``, default ``redis://127.0.0.1:6379/9``, with a channel prefix of its
own); the default is the embedded one (SQLite and the embedded Redis). No peer: the figures are
held to the targets above, which the JSON reports with ``met`` (``--server daphne`` gives the
console's earlier server for comparison).

Prints one JSON object. Needs ``wrk`` (Debian: ``apt-get install wrk``; .ci/run installs it).
Run: ``.venv/bin/python benchmarks/load.py [--database postgres]`` (about six minutes on two
cores); ``--quick``: a ramp of 20 and 40 requests per second for 2 s each, 20 per second for 3 s,
64 trajectories of 3-6 turns, 10 clients, in seconds, as CI runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import importlib.metadata
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from benchmarks.console_streaming import live_run, percentiles, rollouts_for, seed_library

QUICK = {
    "rate": 20.0,
    "seconds": 3.0,
    "ramp": "20,40",
    "ramp_seconds": 2.0,
    "turns": (3, 6),
    "trajectories": 64,
    "clients": 10,
    "viewers": 3,
    "history_steps": 3,
    "ingest_rate": 5.0,
}
REQUEST_TIMEOUT_S = 10.0
WEB_SERVERS = ("granian", "uvicorn", "gunicorn", "daphne")  # console.management.stack's


def turn_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


LIVE_PERIOD_S = 0.5
LIVE_TRAJECTORIES = 64


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=400.0, help="requests per second")
    parser.add_argument(
        "--ramp",
        default="50,75,100,150,200,300,400,600",
        help="request rates (per second, comma-separated) stepped up, --ramp-seconds each, "
        "until one has an error; the highest without is reported ('' to skip)",
    )
    parser.add_argument("--ramp-seconds", type=float, default=20.0, help="length of a step")
    parser.add_argument(
        "--server",
        choices=WEB_SERVERS,
        default="granian",
        help="the web server (granian: what `crucible up` runs)",
    )
    parser.add_argument("--workers", type=int, default=0, help="web workers (0: one per CPU)")
    parser.add_argument(
        "--response-cache-ms",
        type=int,
        default=None,
        help="the console's micro-cache (CRUCIBLE_WEB_RESPONSE_CACHE_MS; default: the "
        "settings', as `up` runs it; 0: every request through Django, the ablation)",
    )
    parser.add_argument(
        "--skip-ingestion", action="store_true", help="the request load only (server comparisons)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the request load")
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=0.0,
        help="before each measured load, the same load on the same fresh server for this long, "
        "reported apart as its 'warmup' (0: measured from the server's cold start)",
    )
    parser.add_argument("--trajectories", type=int, default=1024, help="of the ingested step")
    parser.add_argument(
        "--turns",
        type=turn_range,
        default=(30, 60),
        help="turns per ingested trajectory, MIN-MAX (drawn per trajectory; default 30-60)",
    )
    parser.add_argument("--clients", type=int, default=1000, help="websocket clients")
    parser.add_argument(
        "--viewers",
        type=int,
        default=20,
        help="signed-in viewers the request load comes from (each wrk connection is one of "
        "them, round-robin): kept answers are per viewer, so more viewers, fewer hits",
    )
    parser.add_argument("--ingest-rate", type=float, default=20.0, help="console requests/s then")
    parser.add_argument("--history-steps", type=int, default=20, help="of the seeded run")
    parser.add_argument("--database", choices=("embedded", "postgres"), default="embedded")
    parser.add_argument("--database-url", default="postgres://root@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--var-dir", default="", help="keep the var dir here (default: temporary)")
    return common.parse_args(parser, QUICK)


# --- data -------------------------------------------------------------------------------------


TOOL_OUTPUT_BYTES = (512, 8192)
"""The size range of a turn's tool output (bytes), drawn uniformly per turn."""


def pytest_output(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of text that reads like a pytest run's output (test ids, progress,
    a failure's traceback and assertion), as a coding agent's ``run_tests`` call returns."""
    words = ("parse", "config", "loader", "cache", "tokenize", "merge", "window", "schema")
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.2, pytest-8.3.4, pluggy-1.5.0",
        f"rootdir: /workspace/repo-{rng.randrange(1000):03d}",
        f"collected {rng.randrange(5, 400)} items",
        "",
    ]
    while sum(len(line) + 1 for line in lines) < size:
        module = f"tests/test_{rng.choice(words)}_{rng.choice(words)}.py"
        kind = rng.random()
        if kind < 0.6:
            marks = "".join(rng.choice("....F.s.E.") for _ in range(rng.randrange(10, 60)))
            lines.append(f"{module} {marks} [{rng.randrange(1, 100):3d}%]")
        elif kind < 0.85:
            name = f"test_{rng.choice(words)}_{rng.randrange(100)}"
            lines += [
                f"________________________________ {name} ________________________________",
                f"    def {name}():",
                f"        result = {rng.choice(words)}({rng.randrange(1000)}, strict=True)",
                f">       assert result == {rng.randrange(1000)}",
                f"E       assert {rng.randrange(1000)} == {rng.randrange(1000)}",
                f"{module}:{rng.randrange(10, 900)}: AssertionError",
            ]
        else:
            lines.append(
                f"FAILED {module}::test_{rng.choice(words)} - ValueError: bad "
                f"{rng.choice(words)} at offset {rng.randrange(1 << 16)}"
            )
    passed, failed = rng.randrange(100), rng.randrange(10)
    lines.append(
        f"========== {failed} failed, {passed} passed in {rng.uniform(0.1, 9):.2f}s =========="
    )
    return "\n".join(lines)[:size]


def realistic_turns(rollouts: list, turns: tuple[int, int], *, seed: int = 0) -> list:
    """``rollouts`` with agent episodes of a realistic size: ``turns`` (min, max) turns each
    (drawn uniformly per trajectory), each turn a ``run_tests`` tool call whose output is
    :data:`TOOL_OUTPUT_BYTES` of pytest-like text, after a short reasoning text."""
    from training.agents.trajectory import AgentTrajectory, ToolRecord  # noqa: PLC0415

    rng = random.Random(seed)
    for rollout in rollouts:
        first = rollout.turns[0]
        episode = []
        for index in range(rng.randint(*turns)):
            output = pytest_output(rng, rng.randint(*TOOL_OUTPUT_BYTES))
            tool = ToolRecord(
                call_id="call_0",
                name="run_tests",
                arguments={"command": "python -m pytest -q -x"},
                output=output,
                seconds=round(rng.uniform(0.2, 6.0), 3),
            )
            episode.append(
                dataclasses.replace(
                    first,
                    index=index,
                    text=f"The failure is in the {rng.choice(('parser', 'cache', 'loader'))}; "
                    "running the tests again after the fix.",
                    message={"role": "assistant", "content": "", "tool_calls": []},
                    tools=[tool],
                    observation_ids=[9] * 8,
                    action="tool_calls",
                    tool_s=tool.seconds,
                )
            )
        rollout.trajectory = AgentTrajectory.of(rollout.prompt_ids, episode)
    return rollouts


def seed(args) -> dict:
    from django.conf import settings  # noqa: PLC0415
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY  # noqa: PLC0415
    from django.contrib.auth.models import Group, User  # noqa: PLC0415
    from django.contrib.sessions.backends.db import SessionStore  # noqa: PLC0415
    from django.utils.crypto import get_random_string  # noqa: PLC0415

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
    viewer = Group.objects.get(name=ROLES["viewer"])
    cookies = []
    for number in range(args.viewers):
        user = User.objects.create_user(f"load-viewer-{number}", password=uuid.uuid4().hex)
        user.groups.add(viewer)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        # What a signed-in browser sends: its session and the CSRF cookie the first page set.
        cookies.append(
            f"{settings.SESSION_COOKIE_NAME}={session.session_key}; "
            f"{settings.CSRF_COOKIE_NAME}={get_random_string(32)}"
        )
    return {
        "task_set": task_set,
        "version": version,
        "history": history,
        "cookie": cookies[0].split(";")[0].split("=", 1)[1],
        "cookies": cookies,
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


# --- request load: wrk in a process of its own ----------------------------------------------

WRK_SCRIPT = Path(__file__).resolve().with_name("load_wrk.lua")


def wrk_version() -> str:
    """wrk's version line (``wrk 4.1.0 [epoll] ...``), or "" when wrk is not installed."""
    if not shutil.which("wrk"):
        return ""
    done = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip().splitlines()[0]


def _connections(rate: float) -> int:
    """wrk connections for ``rate``: each one sends a request every connections / rate seconds
    (500 ms) at most, so a request answered within 500 ms never delays the next one's start, and
    past capacity the server, not the generator, holds the queue (and answers 503)."""
    return max(4, min(512, math.ceil(rate / 2)))


def _group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group
    ``pgid`` (a web server and its workers); 0.0 without /proc."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def request_load(
    base: str,
    cookies: list[str],
    paths: dict,
    *,
    rate: float,
    seconds: float,
    stop: threading.Event | None = None,
    server_pgid: int | None = None,
) -> dict:
    """Open-loop GET requests at ``rate`` per second for ``seconds`` (or until ``stop`` is set:
    then nothing more is sent and the requests in flight are waited for, at most
    :data:`REQUEST_TIMEOUT_S`),
    sent by wrk in a process of its own (``load_wrk.lua``: request *i* is due at ``i / rate``
    whatever the answers before it did; its latency counts from that moment). Per family:
    requests, errors (a status >= 400, or no answer within :data:`REQUEST_TIMEOUT_S`), p50 and
    p99 in milliseconds. ``unsent``: requests due that wrk never sent (the server held every
    connection); ``unanswered``: sent, never answered (a timeout, a dropped connection); both
    count as errors. ``generator_cpu``: wrk's own CPU seconds and cores (CPU seconds / wall
    seconds); ``server_cpu``: the same for the web server's process group, when given."""
    host = urlsplit(base)
    conns = _connections(rate)
    total = max(1, int(rate * seconds))
    with tempfile.TemporaryDirectory(prefix="crucible-wrk-") as tmp:
        listing = Path(tmp) / "paths"
        listing.write_text(
            "".join(f"{family} {path}\n" for family, items in paths.items() for path in items)
        )
        cookie_file = Path(tmp) / "cookies"
        cookie_file.write_text("".join(f"{cookie}\n" for cookie in cookies))
        out_file = Path(tmp) / "out"
        stop_file = Path(tmp) / "stop"
        start_ms = (time.monotonic() + 1.0) * 1000  # wrk's threads connect before the first
        duration = seconds + 1.0 + REQUEST_TIMEOUT_S
        argv = [
            *("wrk", "-t", str(conns), "-c", str(conns), "-d", f"{duration:.0f}s"),
            *("--timeout", f"{REQUEST_TIMEOUT_S:.0f}s", "-s", str(WRK_SCRIPT)),
            f"{host.scheme}://{host.netloc}",
            *("--", str(rate), str(seconds), f"{start_ms:.3f}", str(conns)),
            *(str(listing), str(cookie_file), str(out_file), str(stop_file) if stop else "-"),
        ]
        server_before = _group_cpu_s(server_pgid) if server_pgid else None
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # wrk has no "stop when done": it runs its duration unless interrupted (SIGINT: it then
        # stops its threads and writes what it has). Interrupt it once every request is due and
        # has had its timeout, or once every connection has finished: its share sent and
        # answered, or, after ``stop``, its request in flight answered (the stop file).
        deadline = started + 1.0 + seconds + REQUEST_TIMEOUT_S
        while proc.poll() is None:
            if stop is not None and stop.is_set() and not stop_file.exists():
                stop_file.touch()
                deadline = min(deadline, time.monotonic() + REQUEST_TIMEOUT_S)
            if time.monotonic() > deadline:
                proc.send_signal(signal.SIGINT)
                break
            marks = Path(f"{out_file}.done")
            if marks.exists() and marks.stat().st_size >= conns:
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.05)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        server_cpu = _group_cpu_s(server_pgid) - server_before if server_pgid else None
        log = proc.stdout.read().decode(errors="replace")
        if not out_file.exists():
            raise RuntimeError(f"wrk wrote no results (status {status}): {log[-2000:]}")
        lines = out_file.read_text().splitlines()
    results: dict[str, list[tuple[float, float, int, bool]]] = {family: [] for family in paths}
    sent = answered = 0
    errors_by_second: collections.Counter = collections.Counter()
    for line in lines:
        if line.startswith("# sent"):
            _hash, _sent, n_sent, _answered, n_answered = line.split()
            sent += int(n_sent)
            answered += int(n_answered)
            continue
        family, code, due_ms, service_ms, hit, at_ms = line.split()
        results[family].append((float(due_ms), float(service_ms), int(code), hit == "1"))
        if int(code) >= 400:
            errors_by_second[int(float(at_ms) // 1000)] += 1
    out = {}
    for family, rows in results.items():
        codes = collections.Counter(code for _due, _service, code, _hit in rows if code >= 400)
        out[family] = {
            "requests": len(rows),
            "cache_hits": sum(hit for *_rest, hit in rows),
            "errors": sum(codes.values()),
            "error_kinds": sorted(f"HTTP {code}" for code in codes),
            "latency_ms": percentiles([due for due, *_rest in rows]),
            "service_ms": percentiles([service for _due, service, *_rest in rows]),
        }
    unsent = max(0, total - sent) if not (stop and stop.is_set()) else 0
    cpu_s = usage.ru_utime + usage.ru_stime
    return {
        "generator": "wrk",
        "rate_target_per_s": rate,
        "seconds": seconds,
        "connections": conns,
        "requests": answered,
        "sent": sent,
        "unsent": unsent,
        "unanswered": sent - answered,
        "errors": sum(family["errors"] for family in out.values()) + unsent + sent - answered,
        # when the answered errors were due: [second from the start, errors], seconds with any
        "errors_by_second": sorted(errors_by_second.items()),
        "families": out,
        "generator_cpu": {"cpu_s": round(cpu_s, 2), "cores": round(cpu_s / wall, 3)},
        "server_cpu": (
            None
            if server_cpu is None
            else {"cpu_s": round(server_cpu, 2), "cores": round(server_cpu / wall, 3)}
        ),
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


async def ingestion(base: str, data: dict, args) -> dict:
    from django.db import connection  # noqa: PLC0415 (after django.setup)

    from training import services  # noqa: PLC0415 (after django.setup)

    big, live, version = data["big"], data["live"], data["version"]
    rollouts = realistic_turns(rollouts_for(version, 1, args.trajectories), args.turns)
    turns = sum(len(rollout.turns) for rollout in rollouts)
    tool_bytes = sum(len(t.tools[0].output) for rollout in rollouts for t in rollout.turns)
    ingest: dict = {}
    ws_url = base.replace("http://", "ws://") + f"/ws/runs/{live.pk}/"
    root = Path(__file__).resolve().parents[1]

    def big_step():
        try:
            started = time.perf_counter()
            services.step_record(run_id=big.pk, step=1, rollouts=rollouts, metrics={})
            ingest["seconds"] = time.perf_counter() - started
        finally:
            connection.close()

    with tempfile.TemporaryDirectory(prefix="crucible-watchers-") as tmp:
        out_file, stop_file, steps_file = (Path(tmp) / n for n in ("receipts", "stop", "steps"))
        # the watchers in a process of their own (benchmarks/ws_watchers.py)
        watchers = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.ws_watchers", ws_url, base]
            + [str(args.clients), str(out_file)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        connect_started = time.perf_counter()
        settled = json.loads(await asyncio.to_thread(watchers.stdout.readline) or "{}")
        connect_s = time.perf_counter() - connect_started
        # the watched run's trainer in a process of its own too (benchmarks/live_steps.py): a
        # small step every LIVE_PERIOD_S until the big one is written
        trainer = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.live_steps", str(live.pk), str(version.pk)]
            + [str(LIVE_TRAJECTORIES), str(LIVE_PERIOD_S), str(stop_file), str(steps_file)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        if (await asyncio.to_thread(trainer.stdout.readline)).strip() != "ready":
            raise RuntimeError(f"benchmarks/live_steps.py did not start (exit {trainer.wait()})")
        writer = asyncio.create_task(asyncio.to_thread(big_step))
        written = threading.Event()
        console = asyncio.create_task(
            asyncio.to_thread(
                request_load,
                base,
                data["cookies"],
                families(data["history"].pk),
                rate=args.ingest_rate,
                seconds=3600,
                stop=written,
            )
        )
        try:
            await writer
        finally:
            written.set()
            stop_file.touch()
        during = await console
        await asyncio.to_thread(trainer.wait, 60)
        await asyncio.sleep(1.0)  # the last live step's receipts
        watchers.send_signal(signal.SIGINT)
        await asyncio.to_thread(watchers.wait, 30)
        receipts = json.loads(out_file.read_text())["receipts"] if out_file.exists() else []
        steps = json.loads(steps_file.read_text())
    called = {int(step): at for step, at in steps["called"].items()}
    broadcast = {int(step): at for step, at in steps["broadcast"].items()}
    from_call = [(now - called[step]) * 1000 for step, now in receipts if step in called]
    from_broadcast = [(now - broadcast[step]) * 1000 for step, now in receipts if step in broadcast]
    fanout = percentiles(from_broadcast)
    return {
        "trajectories": args.trajectories,
        "turns_per_trajectory": list(args.turns),
        "tool_output_bytes": {"range": list(TOOL_OUTPUT_BYTES), "total": tool_bytes},
        "turns": turns,
        "step_record_s": round(ingest["seconds"], 2),
        "turns_per_s": round(turns / ingest["seconds"], 1),
        "console_during": during,
        "fanout": {
            "clients": args.clients,
            "clients_connected": settled.get("connected", 0),
            "clients_failed": settled.get("failed", []),
            "watchers": "a process of their own (benchmarks/ws_watchers.py)",
            "live_trainer": "a process of its own (benchmarks/live_steps.py)",
            "connect_all_s": round(connect_s, 2),
            "live_steps": len(called),
            "events_expected": args.clients * len(called),
            "events_received": len(from_call),
            # the fan-out itself: from the event's broadcast (after the step's commit) to each
            # client's receipt; the target is held to this
            "broadcast_to_receipt_ms": fanout,
            # from the call of step_record: the live step's own write (which waits for the big
            # step's on SQLite, one writer at a time) plus the fan-out
            "record_to_receipt_ms": percentiles(from_call),
            "target_p99_ms": 250,
            "met": bool(fanout["p99"] is not None and fanout["p99"] < 250),
        },
    }


def main() -> None:
    args = parse_args()
    if args.response_cache_ms is not None:  # before Django reads its settings
        os.environ["CRUCIBLE_WEB_RESPONSE_CACHE_MS"] = str(args.response_cache_ms)
    os.environ.setdefault("CRUCIBLE_CHANNEL_PREFIX", f"load{os.getpid()}")
    with common.profile_database(args, f"crucible_load_{os.getpid()}") as database_url:
        out = measure(args, database_url)
    print(json.dumps(out, indent=2))


def measure(args, database_url: str) -> dict:
    with common.private_var_dir(
        args.var_dir, keep_redis_url=bool(database_url), database_url=database_url
    ) as var:
        return run(args, var)


def run(args, var: Path) -> dict:
    from django.conf import settings  # noqa: PLC0415 (after django.setup)
    from django.db import connection  # noqa: PLC0415

    from console.management.stack import Stack, port_free, web_workers  # noqa: PLC0415

    out: dict = {
        "benchmark": "load",
        "quick": args.quick,
        "cpus": os.cpu_count(),
        "database": connection.vendor,
        "redis": "embedded" if settings.EMBEDDED_REDIS else "REDIS_URL",
        "var_dir": str(var) if args.var_dir else f"{var} (removed)",
    }
    out["server"] = {
        "name": args.server,
        "version": importlib.metadata.version(args.server),
        "workers": web_workers(args.workers or None, server=args.server),
        "concurrency_per_worker": settings.WEB_CONCURRENCY,
        "max_queue_per_worker": settings.WEB_MAX_QUEUE,
        "queue_timeout_ms": settings.WEB_QUEUE_TIMEOUT_MS,
        "response_cache_ms": settings.WEB_RESPONSE_CACHE_MS,
        "viewers": args.viewers,
    }
    out["generator"] = {"name": "wrk", "version": wrk_version(), "script": WRK_SCRIPT.name}
    with Stack() as stack:
        stack.redis()
        data = seed(args)
        paths = families(data["history"].pk)

        def load_at(rate: float, seconds: float) -> dict:
            # A console of its own for each load: an overloaded one's backlog must not be
            # measured as the next load's latency.
            with Stack() as web:
                port = next(p for p in range(8410, 8500) if port_free(p))
                base = web.web(port, server=args.server, workers=args.workers or None)
                if "unloaded_ms" not in out:
                    out["unloaded_ms"] = asyncio.run(unloaded(base, data["cookie"], paths))
                proc = dict(web.started)["web"]
                warmup = None
                if args.warmup_seconds > 0:
                    # the same mix at the same rate, reported apart: what a console in service
                    # has kept; the cold start's own errors stay visible here
                    warmup = request_load(
                        base,
                        data["cookies"],
                        paths,
                        rate=rate,
                        seconds=args.warmup_seconds,
                        server_pgid=proc.pid,
                    )
                measured = request_load(
                    base,
                    data["cookies"],
                    paths,
                    rate=rate,
                    seconds=seconds,
                    server_pgid=proc.pid,
                )
                if warmup is not None:
                    measured["warmup"] = {
                        key: warmup[key]
                        for key in ("seconds", "requests", "errors", "errors_by_second")
                    }
                    measured["warmup"]["p99_ms_worst_family"] = max(
                        (f["latency_ms"]["p99"] or 0) for f in warmup["families"].values()
                    )
                return measured

        ramp = []
        for rate in [float(r) for r in args.ramp.split(",") if r.strip()]:
            step = load_at(rate, args.ramp_seconds)
            ramp.append(_step_summary(step))
            print(json.dumps({"ramp": ramp[-1]}), file=sys.stderr, flush=True)
            if step["errors"]:
                break
        if ramp:
            clean = [step["rate_per_s"] for step in ramp if step["errors"] == 0]
            out["ramp"] = {
                "seconds_per_step": args.ramp_seconds,
                "steps": ramp,
                "highest_rate_without_errors": max(clean) if clean else None,
            }
        requests = load_at(args.rate, args.seconds)
        requests["p99_ms"] = _p99_all(requests)
        requests["met"] = requests["errors"] == 0 and (requests["p99_ms"] or 1e9) < 1000
        out["requests"] = requests
        # on stderr at once: kept should the ingestion phase fail
        print(json.dumps({"requests": _step_summary(requests)}), file=sys.stderr, flush=True)
        if args.skip_ingestion:
            return out
        data["big"], data["live"] = live_run(data["task_set"]), live_run(data["task_set"])
        with Stack() as web:
            port = next(p for p in range(8410, 8500) if port_free(p))
            base = web.web(port, server=args.server, workers=args.workers or None)
            out["ingestion"] = asyncio.run(ingestion(base, data, args))
    target = 10_000 if connection.vendor == "postgresql" else 5000
    out["ingestion"]["target_turns_per_s"] = target
    out["ingestion"]["met_turns_per_s"] = out["ingestion"]["turns_per_s"] >= target
    return out


def _p99_all(load: dict) -> float | None:
    """The p99 over every family's requests: the worst family's p99 (an upper bound of it)."""
    figures = [f["latency_ms"]["p99"] for f in load["families"].values() if f["requests"]]
    return max(figures) if figures else None


def _step_summary(load: dict) -> dict:
    return {
        "rate_per_s": load["rate_target_per_s"],
        "seconds": load["seconds"],
        "requests": load["requests"],
        "errors": load["errors"],
        "unsent": load["unsent"],
        "unanswered": load["unanswered"],
        "error_kinds": sorted({k for f in load["families"].values() for k in f["error_kinds"]}),
        "p50_ms_worst_family": max(
            (f["latency_ms"]["p50"] for f in load["families"].values() if f["requests"]),
            default=None,
        ),
        "p99_ms_worst_family": _p99_all(load),
        "generator_cpu_cores": load["generator_cpu"]["cores"],
        "server_cpu_cores": (load["server_cpu"] or {}).get("cores"),
        "errors_by_second": load["errors_by_second"],
        "warmup": load.get("warmup"),
    }


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
