"""Sandbox demand in Redis: what trainers announce, what the queue holds, what the autoscaler did.

Three signals size the sandbox pool of one runtime (see :mod:`sandboxes.autoscale`):

* **published demand**: each trainer rank announces its phase and how many executions
  of each runtime it has queued or is about to queue (:func:`publish`). One key per
  publisher, ``crucible:sandbox:<runtime>:demand:<publisher>`` = ``{"phase", "demand",
  "at"}`` (JSON), written with a TTL (:data:`PUBLISH_TTL_S`) and refreshed while the
  trainer lives, so a dead trainer's demand expires by itself; the publishers are listed
  in the set ``crucible:sandbox:<runtime>:demanders``. The total is the sum over the
  publishers whose key still exists (:func:`published_demand`).
* **queue depth**: ``LLEN crucible:sandbox:<runtime>:pending``
  (:func:`sandboxes.queue.pending_key`), the list a Kubernetes HPA/KEDA scaler targets;
* **in flight**: the requests the live workers hold in their ``processing`` lists.

The local autoscaler writes its own state to ``crucible:sandbox:<runtime>:autoscaler``
(JSON, TTL) so the console and the trainer can show desired and actual pool size.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from sandboxes import queue as Q
from sandboxes.sessions import routing

PUBLISH_TTL_S = 15
"""Seconds a published demand lives unless refreshed (a trainer refreshes every third of it)."""

AUTOSCALER_TTL_S = 10
"""Seconds the autoscaler's state lives unless refreshed (it writes it every tick)."""


def demand_key(runtime: str, publisher: str) -> str:
    """One publisher's demand for ``runtime``: JSON ``{"phase", "demand", "at"}`` with a TTL."""
    return f"{Q.PREFIX}:{runtime}:demand:{publisher}"


def demanders_key(runtime: str) -> str:
    """The set of publishers that announced demand for ``runtime`` (expired ones are pruned on
    read)."""
    return f"{Q.PREFIX}:{runtime}:demanders"


def autoscaler_key(runtime: str) -> str:
    """The local autoscaler's state for ``runtime`` (JSON, see :mod:`sandboxes.autoscale`)."""
    return f"{Q.PREFIX}:{runtime}:autoscaler"


def publish(
    publisher: str, *, phase: str, demand: dict[str, int], ttl_s: int = PUBLISH_TTL_S, client=None
) -> None:
    """Announce ``publisher``'s phase and its demand per runtime (executions), for ``ttl_s``
    seconds.

    Args:
        publisher: who announces (a trainer rank: ``run-<id>-rank-<r>``); unique per process.
        phase: what it does now (``rollout``, ``update``...), shown beside the demand.
        demand: runtime -> executions queued, in flight or about to be queued; a runtime
            with 0 keeps its key (the phase stays visible) but adds nothing to the total.

    Raises:
        ValueError: a negative demand (names the runtime).
        redis.RedisError: Redis does not answer.
    """
    client = client or Q.connection()
    now = round(time.time(), 3)
    pipe = client.pipeline(transaction=False)
    for runtime, count in demand.items():
        if count < 0:
            raise ValueError(
                f"demand for runtime {runtime!r} is {count}; it counts executions and cannot be "
                "negative"
            )
        pipe.set(
            demand_key(runtime, publisher),
            json.dumps({"phase": phase, "demand": int(count), "at": now}),
            ex=max(1, int(ttl_s)),
        )
        pipe.sadd(demanders_key(runtime), publisher)
    pipe.execute()


def withdraw(publisher: str, runtimes, *, client=None) -> None:
    """Take ``publisher``'s demand back at once (a trainer that ends cleanly; no wait for the
    TTL)."""
    client = client or Q.connection()
    pipe = client.pipeline(transaction=False)
    for runtime in runtimes:
        pipe.delete(demand_key(runtime, publisher))
        pipe.srem(demanders_key(runtime), publisher)
    pipe.execute()


def publishers(runtime: str, *, client=None) -> dict[str, dict]:
    """The live publishers of ``runtime``: ``{publisher: {"phase", "demand", "at"}}``; expired
    ones are removed from the set on the way."""
    client = client or Q.connection()
    names = sorted(raw.decode() for raw in client.smembers(demanders_key(runtime)))
    if not names:
        return {}
    values = client.mget([demand_key(runtime, name) for name in names])
    live, gone = {}, []
    for name, raw in zip(names, values):
        if raw is None:
            gone.append(name)
            continue
        try:
            live[name] = json.loads(raw)
        except ValueError:
            gone.append(name)
    if gone:
        client.srem(demanders_key(runtime), *gone)
    return live


def published_demand(runtime: str, *, client=None) -> int:
    """The sum of the live publishers' demand for ``runtime`` (executions)."""
    return sum(int(entry.get("demand", 0)) for entry in publishers(runtime, client=client).values())


@dataclass
class PoolSignals:
    """One reading of a runtime's pool and its demand (counts of executions or slots).

    ``slots`` are live queue consumers (a worker process holds ``--concurrency`` of them);
    ``held`` maps each live slot's id to the requests its ``processing`` list holds;
    ``sessions`` maps each live session slot's id to the sessions it holds.
    """

    runtime: str
    depth: int
    in_flight: int
    slots: int
    published: int
    phases: dict[str, str] = field(default_factory=dict)  # publisher -> phase
    held: dict[str, int] = field(default_factory=dict)
    autoscaler: dict | None = None
    sessions: dict[str, int] = field(default_factory=dict)

    @property
    def queued_demand(self) -> int:
        """Executions waiting or running now: ``depth + in_flight``."""
        return self.depth + self.in_flight

    @property
    def demand(self) -> int:
        """What the pool should serve: the larger of the trainers' announcement and the queue's
        load.

        The larger, not the sum: a trainer announces the executions it is about to queue, so
        once they are queued both signals count the same requests.
        """
        return max(self.published, self.queued_demand)


def pool_signals(runtime: str, *, client=None) -> PoolSignals:
    """Read the pool of ``runtime`` and its demand from Redis (four pipelined round trips).

    Raises:
        redis.RedisError: Redis does not answer.
    """
    client = client or Q.connection()
    ids = sorted(raw.decode() for raw in client.smembers(Q.workers_key(runtime)))
    pipe = client.pipeline(transaction=False)
    pipe.llen(Q.pending_key(runtime))
    pipe.get(autoscaler_key(runtime))
    for worker_id in ids:
        pipe.exists(Q.alive_key(worker_id))
        pipe.llen(Q.processing_key(worker_id))
    answers = pipe.execute()
    depth, raw_state = int(answers[0]), answers[1]
    held, in_flight = {}, 0
    for index, worker_id in enumerate(ids):
        alive, holding = answers[2 + 2 * index], int(answers[3 + 2 * index])
        in_flight += holding  # a dead slot's requests still wait for a reaper: they are demand
        if alive:
            held[worker_id] = holding
    live = publishers(runtime, client=client)
    state = None
    if raw_state is not None:
        try:
            state = json.loads(raw_state)
        except ValueError:
            state = None
    return PoolSignals(
        runtime=runtime,
        depth=depth,
        in_flight=in_flight,
        slots=len(held),
        published=sum(int(e.get("demand", 0)) for e in live.values()),
        phases={name: str(e.get("phase", "")) for name, e in live.items()},
        held=held,
        autoscaler=state,
        sessions=routing.live_slots(runtime, client),
    )
