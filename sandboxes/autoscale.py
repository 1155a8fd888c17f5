"""The local sandbox autoscaler: worker processes between bounds, following the demand.

The local analogue of a Kubernetes HorizontalPodAutoscaler (or KEDA) on the sandbox
Deployment: the unit it adds and removes is a whole ``sandbox_worker`` process (a pod
there), each with ``slots_per_worker`` slots (``--concurrency``). Every ``interval_s``
the :class:`Supervisor` reads the demand (:func:`sandboxes.demand.pool_signals`: the
trainers' published demand, the queue depth and the requests in flight) and sizes the pool

    desired = clamp(ceil(demand / slots_per_worker), min_workers, max_workers)

as the HPA's ``desiredReplicas = ceil(currentReplicas * currentMetric / target)`` does with
a per-pod target of ``slots_per_worker`` executions. Up at once; down only to the highest
size recommended within the last ``scale_down_delay_s`` (the HPA's scale-down stabilisation
window, :class:`Stabiliser`), so a queue that empties between two rollout turns does not
shrink the pool.

Scaling down drains, and only idle workers: a worker whose slots hold a request is left
alone until it is idle (its work is demand; killing it would run the request again), and so
is one that holds sessions (draining it would lose them) until they are closed. The
worker gets SIGTERM, its slots finish what they took meanwhile (no new request is taken),
it deletes its heartbeats, requeues whatever it still held, and exits. One that outlives
``drain_timeout_s`` is killed. Whatever a killed or crashed worker held goes straight back
to the queue (the supervisor runs the queue's reaper for its slots at once instead of
waiting for their heartbeats to expire), so no request is lost. A worker that crashes soon
after it started is restarted with an exponential back-off (1 s doubling to 60 s), as a
Kubernetes CrashLoopBackOff does.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass

import redis
from django.conf import settings

from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes.worker import REAP_SCRIPT

log = logging.getLogger(__name__)

CRASH_WITHIN_S = 10.0
"""A worker that exits on its own this soon after it started counts as a crash (back-off)."""

BACKOFF_MAX_S = 60.0


@dataclass(frozen=True)
class ScalePolicy:
    """The bounds and pace of the pool. Units: worker processes, slots, seconds.

    Raises:
        ValueError: from the constructor, naming the ``sandbox_worker`` flag to fix.
    """

    min_workers: int
    max_workers: int
    slots_per_worker: int
    scale_down_delay_s: float = 10.0
    interval_s: float = 0.5
    drain_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.min_workers < 1:
            raise ValueError(
                f"--min-workers must be at least 1 (got {self.min_workers}): with no worker alive "
                f"the queue's callers give up on the runtime after {Q.NO_WORKER_GRACE_S:.0f} s"
            )
        if self.max_workers < self.min_workers:
            raise ValueError(
                f"--max-workers ({self.max_workers}) must be at least "
                f"--min-workers ({self.min_workers})"
            )
        if self.slots_per_worker < 1:
            raise ValueError(f"--concurrency must be at least 1 (got {self.slots_per_worker})")
        if self.scale_down_delay_s < 0:
            raise ValueError(
                f"--scale-down-delay must be 0 or more seconds (got {self.scale_down_delay_s})"
            )
        if not 0 < self.interval_s <= 60:
            raise ValueError(f"--scale-interval must be in (0, 60] seconds (got {self.interval_s})")
        if self.drain_timeout_s <= 0:
            raise ValueError(
                f"--drain-timeout must be more than 0 seconds (got {self.drain_timeout_s})"
            )


def desired_workers(demand: int, policy: ScalePolicy) -> int:
    """``clamp(ceil(demand / slots_per_worker), min_workers, max_workers)``: the worker processes
    that serve ``demand`` concurrent executions, within the bounds."""
    wanted = math.ceil(max(0, demand) / policy.slots_per_worker)
    return max(policy.min_workers, min(policy.max_workers, wanted))


class Stabiliser:
    """The HPA's scale-down stabilisation: the size is the highest recommendation of the last
    ``window_s`` seconds, so it rises at once and falls ``window_s`` after the demand did.

    (Kubernetes: ``behavior.scaleDown.stabilizationWindowSeconds``; the scale-up window is 0.)
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.history: deque[tuple[float, int]] = deque()

    def recommend(self, desired: int, now: float) -> int:
        """Record ``desired`` at ``now`` (monotonic seconds) and return the size to run."""
        self.history.append((now, desired))
        while self.history and self.history[0][0] < now - self.window_s:
            self.history.popleft()
        return max(size for _at, size in self.history)


@dataclass
class Child:
    """One supervised ``sandbox_worker`` process."""

    proc: subprocess.Popen
    started: float
    draining_since: float | None = None

    @property
    def slot_prefix(self) -> str:
        """The prefix of its slots' worker ids (``SandboxWorker.name`` is
        ``<host>-<pid>-<hex>``)."""
        return f"{socket.gethostname()}-{self.proc.pid}-"


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it (a graceful drain) when the supervisor dies, so a
    killed supervisor leaves no worker behind (Linux ``PR_SET_PDEATHSIG``)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass


class Supervisor:
    """Runs ``sandbox_worker`` children of one runtime between the policy's bounds (see the
    module)."""

    def __init__(
        self, *, runtime: str, policy: ScalePolicy, child_argv: list[str] | None = None
    ) -> None:
        self.runtime = runtime
        self.policy = policy
        self.child_argv = child_argv or [
            sys.executable,
            str(settings.BASE_DIR / "manage.py"),
            "sandbox_worker",
            "--runtime",
            runtime,
            "--concurrency",
            str(policy.slots_per_worker),
        ]
        self.children: list[Child] = []
        self.stabiliser = Stabiliser(policy.scale_down_delay_s)
        self.stopping = False
        self.last: dict = {}
        self.backoff_s = 0.0
        self.start_not_before = 0.0  # monotonic: no new worker before it (crash back-off)

    # --- the children ------------------------------------------------------------------

    def _start_child(self) -> Child:
        # preexec_fn is safe here: the supervisor runs one thread
        linux = sys.platform.startswith("linux")
        proc = subprocess.Popen(
            self.child_argv,
            cwd=settings.BASE_DIR,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if linux else None,
        )
        child = Child(proc=proc, started=time.monotonic())
        self.children.append(child)
        log.info("autoscaler %s: started worker pid %d", self.runtime, proc.pid)
        return child

    def _drain(self, child: Child, now: float) -> None:
        child.draining_since = now
        try:
            child.proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        log.info("autoscaler %s: draining worker pid %d", self.runtime, child.proc.pid)

    def _release(self, child: Child, client: redis.Redis) -> int:
        """After ``child`` exited: its heartbeats go and what its slots held returns to the queue
        at once (the queue's reaper script, as a peer would run it after the heartbeat TTL)."""
        moved = 0
        for raw in client.smembers(Q.workers_key(self.runtime)):
            worker_id = raw.decode()
            if not worker_id.startswith(child.slot_prefix):
                continue
            client.delete(Q.alive_key(worker_id))
            moved += int(
                client.eval(
                    REAP_SCRIPT,
                    3,
                    Q.processing_key(worker_id),
                    Q.pending_key(self.runtime),
                    Q.workers_key(self.runtime),
                    worker_id,
                )
            )
        if moved:
            log.warning(
                "autoscaler %s: requeued %d request(s) of worker pid %d (exit code %s)",
                self.runtime,
                moved,
                child.proc.pid,
                child.proc.returncode,
            )
        return moved

    def _collect(self, client: redis.Redis, now: float) -> None:
        """Forget exited children (releasing their slots); kill drains that outlived the timeout."""
        for child in list(self.children):
            if child.proc.poll() is not None:
                if child.draining_since is None and not self.stopping:
                    if now - child.started < CRASH_WITHIN_S:
                        self.backoff_s = min(BACKOFF_MAX_S, max(1.0, 2 * self.backoff_s))
                        self.start_not_before = now + self.backoff_s
                    else:
                        self.backoff_s = 0.0
                    log.warning(
                        "autoscaler %s: worker pid %d exited (code %s); replacing it in %.0f s",
                        self.runtime,
                        child.proc.pid,
                        child.proc.returncode,
                        max(0.0, self.start_not_before - now),
                    )
                self._release(child, client)
                self.children.remove(child)
            elif (
                child.draining_since is not None
                and now - child.draining_since > self.policy.drain_timeout_s
            ):
                log.warning(
                    "autoscaler %s: worker pid %d still draining after %.0f s; killing it",
                    self.runtime,
                    child.proc.pid,
                    self.policy.drain_timeout_s,
                )
                child.proc.kill()

    def _drainable(self, active: list[Child], signals: D.PoolSignals) -> list[Child]:
        """The children that may be drained now, first first: not ready yet (no slot heart-beating),
        then idle ones, newest first. A child holding a request, or a session (draining would
        lose it), is not drainable."""
        candidates = []
        for child in active:
            slots = [wid for wid in signals.held if wid.startswith(child.slot_prefix)]
            sessions = sum(
                count
                for sid, count in signals.sessions.items()
                if sid.startswith(child.slot_prefix)
            )
            if not sessions and not any(signals.held[wid] for wid in slots):
                candidates.append((bool(slots), -child.started, child))
        return [child for _ready, _age, child in sorted(candidates, key=lambda c: c[:2])]

    # --- one decision --------------------------------------------------------------------

    def tick(self, client: redis.Redis | None = None, now: float | None = None) -> dict:
        """Read the demand, resize the pool, publish the state; returns that state (see
        :meth:`state`)."""
        client = client or Q.connection()
        now = time.monotonic() if now is None else now
        self._collect(client, now)
        signals = D.pool_signals(self.runtime, client=client)
        desired = desired_workers(signals.demand, self.policy)
        target = self.stabiliser.recommend(desired, now)
        active = [c for c in self.children if c.draining_since is None]
        if len(active) < target and now >= self.start_not_before:
            for _ in range(target - len(active)):
                self._start_child()
        elif len(active) > target:
            for child in self._drainable(active, signals)[: len(active) - target]:
                self._drain(child, now)
        self.last = self.state(signals, desired=desired, target=target)
        client.set(D.autoscaler_key(self.runtime), json.dumps(self.last), ex=D.AUTOSCALER_TTL_S)
        return self.last

    def state(self, signals: D.PoolSignals, *, desired: int, target: int) -> dict:
        """What the console and the trainer read: ``{"runtime", "min_workers", "max_workers",
        "slots_per_worker", "demand", "published", "depth", "in_flight", "desired" (workers the
        demand asks for now), "target" (after stabilisation), "workers" (running, not draining),
        "draining", "worker_pids" (running ones), "slots" (live slots of the runtime, any
        process), "at" (unix s)}``."""
        return {
            "runtime": self.runtime,
            "min_workers": self.policy.min_workers,
            "max_workers": self.policy.max_workers,
            "slots_per_worker": self.policy.slots_per_worker,
            "demand": signals.demand,
            "published": signals.published,
            "depth": signals.depth,
            "in_flight": signals.in_flight,
            "desired": desired,
            "target": target,
            "workers": sum(1 for c in self.children if c.draining_since is None),
            "draining": sum(1 for c in self.children if c.draining_since is not None),
            "worker_pids": [c.proc.pid for c in self.children if c.draining_since is None],
            "slots": signals.slots,
            "supervisor_pid": os.getpid(),
            "at": round(time.time(), 3),
        }

    # --- the loop --------------------------------------------------------------------------

    def serve(self) -> None:
        """Tick every ``interval_s`` until :meth:`request_stop` (SIGTERM, Ctrl-C), then stop
        every child.

        A Redis outage is logged and retried; the children keep serving meanwhile.
        """
        try:
            while not self.stopping:
                started = time.monotonic()
                try:
                    self.tick()
                except (redis.RedisError, OSError) as exc:
                    log.warning("autoscaler %s: %s; retrying", self.runtime, exc)
                time.sleep(max(0.0, self.policy.interval_s - (time.monotonic() - started)))
        finally:
            self.stop()

    def request_stop(self, *_args) -> None:
        self.stopping = True

    def stop(self) -> None:
        """Drain every child (SIGTERM), wait up to ``drain_timeout_s``, kill the rest, release
        their slots."""
        self.stopping = True
        now = time.monotonic()
        for child in self.children:
            if child.proc.poll() is None and child.draining_since is None:
                self._drain(child, now)
        deadline = now + self.policy.drain_timeout_s
        for child in self.children:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
        try:
            client = Q.connection()
            for child in self.children:
                self._release(child, client)
            client.delete(D.autoscaler_key(self.runtime))
        except (redis.RedisError, OSError) as exc:
            log.warning("autoscaler %s: could not clean up in Redis: %s", self.runtime, exc)
        self.children.clear()
