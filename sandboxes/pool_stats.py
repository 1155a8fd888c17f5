"""Read-only statistics of the sandbox pool, from what Redis holds (the console's pool panel).

Per runtime: the workers (a worker is one queue slot with its own heartbeat, see
:mod:`sandboxes.queue`) that are alive, and of those how many hold a request in their
``processing`` list (busy) or none (idle); registered workers whose heartbeat expired
(dead, waiting for a reaper); the queue depth (``pending``); and, over the most recent
executions the workers recorded (:func:`record`, at most :data:`RECENT_MAX` per runtime: queued
requests by their kind, and session calls as ``session_<op>``, ``session_exec`` with its
execution's status), the p50 and p99 execution latency and the statuses by request kind; the
demand trainers announce (:mod:`sandboxes.demand`) with each trainer's phase, and the local
autoscaler's state when one runs (:mod:`sandboxes.autoscale`).

Nothing here writes: a few pipelined reads per runtime, so a page may poll it every few seconds.
"""

from __future__ import annotations

import json
import math
import time

from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes.runtimes import EXECUTORS

RECENT_MAX = 500
"""How many recent executions each runtime keeps (a capped list: LPUSH + LTRIM)."""


def recent_key(runtime: str) -> str:
    """The capped list of a runtime's recent executions, newest first."""
    return f"{Q.PREFIX}:{runtime}:recent"


def recent_entry(*, kind: str, status: str, wall_ms: float, exec_ms: float) -> str:
    """One recent execution as the workers record it (JSON, a few dozen bytes).

    ``wall_ms`` is the sandbox's own wall time (spawn to exit); ``exec_ms`` what the worker
    spent on the request (from taking it off the queue to its answer).
    """
    return json.dumps(
        {
            "kind": kind,
            "status": status,
            "wall_ms": round(float(wall_ms), 2),
            "exec_ms": round(float(exec_ms), 2),
            "at": round(time.time(), 3),
        },
        separators=(",", ":"),
    )


def record(pipe, runtime: str, entry: str) -> None:
    """Add ``entry`` to ``runtime``'s recent executions in ``pipe`` (no round trip of its own)."""
    key = recent_key(runtime)
    pipe.lpush(key, entry)
    pipe.ltrim(key, 0, RECENT_MAX - 1)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by the nearest-rank method; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def known_runtimes() -> list[str]:
    return sorted(EXECUTORS)


def runtime_stats(runtime: str, client=None) -> dict:
    """The pool statistics of one runtime (see the module's docstring); five round trips."""
    client = client or Q.connection()
    ids = sorted(raw.decode() for raw in client.smembers(Q.workers_key(runtime)))
    pipe = client.pipeline(transaction=False)
    for worker_id in ids:
        pipe.exists(Q.alive_key(worker_id))
        pipe.llen(Q.processing_key(worker_id))
    pipe.llen(Q.pending_key(runtime))
    pipe.lrange(recent_key(runtime), 0, RECENT_MAX - 1)
    pipe.get(D.autoscaler_key(runtime))
    answers = pipe.execute()
    autoscaler_raw = answers.pop()
    recent_raw = answers.pop()
    depth = int(answers.pop())
    alive = busy = dead = in_flight = 0
    for index in range(len(ids)):
        is_alive, holding = answers[2 * index], int(answers[2 * index + 1])
        if is_alive:
            alive += 1
            busy += holding > 0
        else:
            dead += 1
        in_flight += holding
    exec_ms, wall_ms, statuses = [], [], {}
    for raw in recent_raw:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        exec_ms.append(float(entry.get("exec_ms", 0.0)))
        wall_ms.append(float(entry.get("wall_ms", 0.0)))
        by_kind = statuses.setdefault(entry.get("kind") or "?", {})
        by_kind[entry.get("status") or "?"] = by_kind.get(entry.get("status") or "?", 0) + 1
    trainers = D.publishers(runtime, client=client)
    published = sum(int(entry.get("demand", 0)) for entry in trainers.values())
    try:
        autoscaler = json.loads(autoscaler_raw) if autoscaler_raw else None
    except ValueError:
        autoscaler = None
    return {
        "workers": {"alive": alive, "busy": busy, "idle": alive - busy, "dead": dead},
        "queue_depth": depth,
        "in_flight": in_flight,
        # what the pool should serve: the larger of the trainers' announcement and the queue's load
        "demand": {
            "published": published,
            "total": max(published, depth + in_flight),
            "trainers": {
                name: {"phase": entry.get("phase"), "demand": entry.get("demand")}
                for name, entry in trainers.items()
            },
        },
        "autoscaler": autoscaler,
        "recent": len(exec_ms),
        "latency_ms": {"p50": percentile(exec_ms, 0.50), "p99": percentile(exec_ms, 0.99)},
        "wall_ms": {"p50": percentile(wall_ms, 0.50), "p99": percentile(wall_ms, 0.99)},
        "statuses": statuses,
    }


def pool_stats(runtimes: list[str] | None = None) -> dict:
    """``{"at": unix time, "runtimes": {runtime: runtime_stats(...)}}`` for every known runtime.

    Raises:
        redis.RedisError: Redis does not answer (the caller says so; nothing is guessed).
    """
    client = Q.connection()
    return {
        "at": time.time(),
        "recent_max": RECENT_MAX,
        "runtimes": {
            runtime: runtime_stats(runtime, client) for runtime in (runtimes or known_runtimes())
        },
    }
