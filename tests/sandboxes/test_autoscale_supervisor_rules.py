"""The supervisor's own rules, tick by tick, over the real Redis with stand-in child processes
(``sleep``; their slots' heartbeats written here): only idle workers are drained, and a worker that
keeps crashing at start is restarted with a growing back-off, not in a tight loop."""

from __future__ import annotations

import sys
import time

from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes.autoscale import ScalePolicy, Supervisor
from sandboxes.sessions import routing


class Counting(Supervisor):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.starts = 0

    def _start_child(self):
        self.starts += 1
        return super()._start_child()


def heartbeat(supervisor: Supervisor, runtime: str, *, holding: dict[int, int]) -> None:
    """Stand in for the children's slots: one live slot per child, holding ``holding[pid]``
    requests."""
    client = Q.connection()
    for child in supervisor.children:
        slot = f"{child.slot_prefix}abc-0"
        client.sadd(Q.workers_key(runtime), slot)
        client.set(Q.alive_key(slot), "1", ex=10)
        client.delete(Q.processing_key(slot))
        if holding.get(child.proc.pid):
            client.lpush(Q.processing_key(slot), *["{}"] * holding[child.proc.pid])


def test_only_idle_workers_are_drained(runtime):
    policy = ScalePolicy(
        min_workers=1, max_workers=3, slots_per_worker=1, scale_down_delay_s=0, interval_s=0.1
    )
    supervisor = Supervisor(runtime=runtime, policy=policy, child_argv=["sleep", "60"])
    try:
        D.publish("trainer", phase="rollout", demand={runtime: 3})
        assert supervisor.tick()["workers"] == 3
        busy = supervisor.children[0]
        heartbeat(supervisor, runtime, holding={busy.proc.pid: 1})
        D.publish("trainer", phase="update", demand={runtime: 0})
        state = supervisor.tick()
        # the demand is the one request in flight: one worker; the two idle ones are drained
        assert state["target"] == 1 and state["workers"] == 1 and state["draining"] == 2
        assert state["worker_pids"] == [busy.proc.pid]

        # now the busy one is the only one and must stay, the floor being 1
        time.sleep(0.3)
        state = supervisor.tick()
        assert state["workers"] == 1 and state["draining"] == 0 and len(supervisor.children) == 1

        # two more for an announced 3, all of them busy: the demand falls, nobody is drained
        D.publish("trainer", phase="rollout", demand={runtime: 3})
        assert supervisor.tick()["workers"] == 3
        heartbeat(supervisor, runtime, holding={c.proc.pid: 1 for c in supervisor.children})
        D.publish("trainer", phase="update", demand={runtime: 0})
        Q.connection().delete(
            Q.processing_key(f"{busy.slot_prefix}abc-0")
        )  # the first one finished
        state = supervisor.tick()
        assert state["target"] == 2 and state["workers"] == 2 and state["draining"] == 1
        assert busy.proc.pid not in state["worker_pids"]
    finally:
        supervisor.stop()
    assert busy.proc.returncode is not None  # stop() ends every child


def test_a_worker_crashing_at_start_is_restarted_with_back_off(runtime):
    policy = ScalePolicy(min_workers=1, max_workers=1, slots_per_worker=1, interval_s=0.05)
    supervisor = Counting(
        runtime=runtime, policy=policy, child_argv=[sys.executable, "-c", "raise SystemExit(3)"]
    )
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            supervisor.tick()
            time.sleep(0.05)
    finally:
        supervisor.stop()
    # starts at 0 s, then after 1 s and 2 s back-offs (about 1.1 s and 3.2 s): never a tight loop
    assert 2 <= supervisor.starts <= 3, supervisor.starts
    assert supervisor.backoff_s >= 2.0


def test_a_worker_holding_sessions_is_not_drained(runtime):
    policy = ScalePolicy(
        min_workers=1, max_workers=2, slots_per_worker=1, scale_down_delay_s=0, interval_s=0.1
    )
    supervisor = Supervisor(runtime=runtime, policy=policy, child_argv=["sleep", "60"])
    client = Q.connection()
    try:
        D.publish("trainer", phase="rollout", demand={runtime: 2})
        assert supervisor.tick()["workers"] == 2
        heartbeat(supervisor, runtime, holding={})
        older, newer = supervisor.children
        session_slot = f"{newer.slot_prefix}abc-s0"  # the newer one would go first
        client.sadd(routing.registry_key(runtime), session_slot)
        client.set(Q.alive_key(session_slot), "1", ex=10)
        client.set(routing.load_key(session_slot), 3, ex=10)
        D.publish("trainer", phase="update", demand={runtime: 0})
        state = supervisor.tick()
        assert state["draining"] == 1 and state["worker_pids"] == [newer.proc.pid]
        assert older.draining_since is not None and newer.draining_since is None
    finally:
        supervisor.stop()
