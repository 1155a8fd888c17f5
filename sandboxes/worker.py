"""Resident sandbox workers: consume the Redis queue, run each request in warm sandboxes.

One :class:`SandboxWorker` process holds ``concurrency`` slots. Each slot is a
thread with its own runtime executor (for Python a :class:`PythonGrader`: two
zygotes), its own worker id, heartbeat and ``processing`` list in Redis (see
:mod:`sandboxes.queue` for the keys and the retry rule). A zygote that dies
mid-execution is replaced at once and the request goes back to the queue for
another slot; a whole worker process that dies (``kill -9``) stops heart-beating,
and any other worker's reaper requeues what it held.

The same worker holds sessions (``sandboxes/sessions/``): ``session_slots`` more threads,
each with its own session zygote and inbox (:class:`~sandboxes.sessions.slot.SessionSlot`),
heart-beating beside the queue's slots; its reaper also answers the calls of dead session
slots as ``lost``, and sweeps what dead workers on this host left (their cgroups and
workspace stores).

Before it joins the pool a worker runs one trivial execution end to end
(:func:`self_check`), and one session (:func:`session_self_check`): a host or pod where
the sandbox cannot be built, or where its executions cannot set up, refuses to start with
the reason instead of answering every request with a failure.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import socket
import threading
import time
import uuid
from pathlib import Path

import redis
from django.conf import settings

from core import metrics
from core.logcontext import log_context, log_context_bind
from sandboxes import cgroups, pool_stats
from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.resident import SandboxSetupFailed, ZygoteDied
from sandboxes.runtimes import base_runtime, executor_for
from sandboxes.sessions import routing
from sandboxes.sessions.budget import BudgetLimits, SessionBudget
from sandboxes.sessions.host import SessionHost
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.slot import SessionSlot
from sandboxes.sessions.store import WorkspaceStore, sweep_dead_owners
from sandboxes.sessions.workspace import Workspace

log = logging.getLogger(__name__)
HEARTBEAT_EVERY_S = 2.0
HOST_SWEEP_EVERY_S = 30.0  # what dead workers on this host left: cgroups, workspace stores

# Move a dead worker's in-flight requests back to the queue, each with one more
# attempt, and forget the worker: atomic, so two reapers never requeue twice.
REAP_SCRIPT = """
local moved = 0
while true do
  local item = redis.call('RPOP', KEYS[1])
  if not item then break end
  local request = cjson.decode(item)
  request['attempt'] = (request['attempt'] or 0) + 1
  redis.call('RPUSH', KEYS[2], cjson.encode(request))
  moved = moved + 1
end
redis.call('SREM', KEYS[3], ARGV[1])
return moved
"""


def _executor(runtime: str):
    """The runtime's executor: an object with ``run(request) -> ExecutionResult`` and
    ``close()``."""
    return executor_for(runtime)


# One trivial grading per runtime, passing, run end to end by :func:`self_check`.
SELF_CHECKS = {
    "python": lambda: Q.python_tests(
        "def add(a, b):\n    return a + b\n",
        "def check(candidate):\n    assert candidate(1, 2) == 3\n",
        "add",
    ),
    "node": lambda: Q.javascript_tests(
        "function add(a, b) {\n  return a + b;\n}\n", "console.assert(add(1, 2) === 3);\n", "add"
    ),
}
# A runtime with a root of its own checks its interpreter the same way (its bare environment).
SELF_CHECKS["python3.13"] = SELF_CHECKS["python"]


class SelfCheckFailed(RuntimeError):
    """The worker's start-up execution did not pass: the sandbox cannot serve here.

    Attributes:
        remedy: what to change (one paragraph), where the failure names a refused step.
    """

    def __init__(self, message: str, remedy: str = "") -> None:
        super().__init__(message)
        self.remedy = remedy


def self_check(runtime: str) -> R.ExecutionResult:
    """Start the runtime's sandboxes and run one trivial, passing grading through them,
    as a queued request would run (namespaces, read-only root, each tree's own setup).

    Returns:
        its result (``ok``); ``enforcement`` and ``readonly_root`` say what holds here.

    Raises:
        SelfCheckFailed: the sandbox cannot start, an execution cannot set up, or the
            trivial grading did not pass (the message says which, ``remedy`` what to do).
        RuntimeUnavailable: the runtime's interpreter is missing.
    """
    try:
        executor = _executor(runtime)
    except ZygoteDied as exc:
        raise SelfCheckFailed(
            f"the {runtime} sandbox cannot start here: {exc}.", getattr(exc, "remedy", "")
        ) from exc
    try:
        result = executor.run(dict(SELF_CHECKS[base_runtime(runtime)](), id="self-check"))
    except ZygoteDied as exc:
        raise SelfCheckFailed(
            f"the {runtime} sandbox started, but a trivial execution failed: {exc}.",
            getattr(exc, "remedy", ""),
        ) from exc
    finally:
        executor.close()
    if result.status != R.OK:
        raise SelfCheckFailed(
            f"the {runtime} sandbox started, but a trivial execution that should pass came back "
            f"{result.status}: {(result.detail or result.stderr)[-500:]}"
        )
    return result


def session_self_check(store_parent: Path) -> str:
    """Open one session end to end (zygote, overlay workspace, a call, a file read) and
    close it, as a served session would run.

    Returns:
        how its limits are held (``cgroup-v1`` or ``rlimit``).

    Raises:
        SelfCheckFailed: sessions cannot be set up here (the message says which step).
    """
    store = WorkspaceStore(store_parent / f"self-check-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    host = SessionHost(store)
    workspace = Workspace.from_files({"check.txt": "crucible\n"})
    try:
        host.start()
        session = host.open(workspace.digest, SessionLimits(), load_blob=lambda: workspace.blob)
        result = host.exec(session.id, "cat check.txt", timeout_s=10)
        host.close(session.id)
    except ZygoteDied as exc:  # SandboxSetupFailed too
        raise SelfCheckFailed(
            f"sandbox sessions cannot be set up here: {exc}.", getattr(exc, "remedy", "")
        ) from exc
    finally:
        host.stop()
        store.close()
    if result.status != R.OK or result.stdout != "crucible\n":
        raise SelfCheckFailed(
            f"a trivial session call came back {result.status}: "
            f"{(result.detail or result.stderr)[-500:]}"
        )
    return host.enforcement


class Slot(threading.Thread):
    """One consumer of the queue with its own warm sandboxes."""

    def __init__(self, worker: SandboxWorker, index: int) -> None:
        super().__init__(name=f"sandbox-slot-{index}", daemon=True)
        self.worker = worker
        self.worker_id = f"{worker.name}-{index}"
        self.executor = None

    def run(self) -> None:
        client = Q.connection()
        pending, processing = Q.pending_key(self.worker.runtime), Q.processing_key(self.worker_id)
        recover = True
        while not self.worker.stopping.is_set():
            try:
                if recover:  # what this slot held when Redis went away goes back to the queue
                    while client.lmove(processing, pending, "RIGHT", "RIGHT") is not None:
                        pass
                    recover = False
                if self.executor is None:
                    self.executor = _executor(self.worker.runtime)
                raw = client.blmove(pending, processing, 1, "RIGHT", "LEFT")
                if raw is not None:
                    with (
                        metrics.SANDBOX_BUSY_SLOTS.labels(self.worker.runtime).track_inprogress(),
                        log_context(),
                    ):
                        self._handle(client, raw, processing)
                    self._prewarm()
            except (redis.RedisError, OSError, ZygoteDied) as exc:
                log.warning("slot %s: %s; retrying in 1 s", self.worker_id, exc)
                recover = True
                time.sleep(1)
        if self.executor is not None:
            self.executor.close()

    def _prewarm(self) -> None:
        """Boot the next request's sandboxes now that this answer has left (off its path)."""
        if self.executor is None:
            return
        try:
            self.executor.prewarm()
        except (ZygoteDied, OSError) as exc:
            log.warning(
                "slot %s: sandbox could not restart (%s); trying again with the next request",
                self.worker_id,
                exc,
            )
            self.executor.close()
            self.executor = None

    def _handle(self, client: redis.Redis, raw: bytes, processing: str) -> None:
        try:
            request = json.loads(raw)
            request["id"], request["reply_to"]  # a request without them cannot be answered
        except (ValueError, TypeError, KeyError) as exc:
            log.error(
                "slot %s: dropping a malformed request (%s): %.200r", self.worker_id, exc, raw
            )
            client.lrem(processing, 1, raw)
            return
        log_context_bind(request_id=request["id"])  # this request's records carry its id
        started = time.monotonic()
        if request.get("attempt", 0) >= Q.MAX_ATTEMPTS:
            last = f" (last: {request['last_error']})" if request.get("last_error") else ""
            result = R.ExecutionResult(
                status=R.INFRA_ERROR,
                detail=f"the sandbox worker died running this request, twice{last}",
            )
        else:
            try:
                result = self.executor.run(request)
            except ZygoteDied as exc:
                # The sandbox died (or could not set up) under this request: a fresh one for
                # this slot, and the request back on the queue for whichever slot is free first.
                log.warning(
                    "slot %s: sandbox %s (%s); requeueing %s",
                    self.worker_id,
                    "setup failed" if isinstance(exc, SandboxSetupFailed) else "died",
                    exc,
                    request["id"],
                )
                self.executor.close()
                self.executor = None
                retry = dict(
                    request, attempt=request.get("attempt", 0) + 1, last_error=str(exc)[:500]
                )
                pipe = client.pipeline()
                pipe.rpush(Q.pending_key(self.worker.runtime), json.dumps(retry))
                pipe.lrem(processing, 1, raw)
                pipe.execute()
                return
            except Exception as exc:  # a bad request must not kill the slot (logged with it)
                log.exception("slot %s: request %s failed", self.worker_id, request.get("id"))
                result = R.ExecutionResult(
                    status=R.INFRA_ERROR, detail=f"sandbox worker error: {exc}"
                )
        # Counted before it is answered: whoever reads the answer and then the metrics sees it.
        metrics.sandbox_execution_observe(
            runtime=self.worker.runtime,
            kind=str(request.get("kind", "")),
            status=result.status,
            latency_ms=(time.monotonic() - started) * 1000,
        )
        pipe = client.pipeline()
        pipe.lpush(
            request["reply_to"], json.dumps({"id": request["id"], "result": result.to_dict()})
        )
        pipe.expire(request["reply_to"], Q.REPLY_TTL_S)
        pipe.lrem(processing, 1, raw)
        # the pool panel's recent executions (a capped list, in the same round trip)
        pool_stats.record(
            pipe,
            self.worker.runtime,
            pool_stats.recent_entry(
                kind=str(request.get("kind", "")),
                status=result.status,
                wall_ms=result.wall_ms,
                exec_ms=(time.monotonic() - started) * 1000,
            ),
        )
        pipe.execute()


class SandboxWorker:
    """``concurrency`` slots of one runtime and ``session_slots`` slots holding sessions
    (default: as many), their heartbeats, and a reaper for dead peers.

    Args:
        runtime: the queue it consumes (and the pool its session slots join).
        concurrency: queue slots; 0 serves sessions only.
        session_slots: slots holding sessions (None: ``concurrency``; 0: none).
        store_parent: where its workspace store lives (default ``VAR_DIR/sandbox-sessions``).

    Raises:
        ValueError: no slot of either kind, or a negative count.
    """

    def __init__(
        self,
        *,
        runtime: str = "python",
        concurrency: int = 2,
        session_slots: int | None = None,
        store_parent: Path | None = None,
    ) -> None:
        session_slots = concurrency if session_slots is None else session_slots
        if concurrency < 0 or session_slots < 0 or concurrency + session_slots == 0:
            raise ValueError(
                f"a sandbox worker needs slots: concurrency {concurrency}, "
                f"session slots {session_slots}"
            )
        self.runtime = runtime
        self.name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.slots = [Slot(self, i) for i in range(concurrency)]
        self.session_slot_count = session_slots
        self.session_slots: list[SessionSlot] = []  # made by serve(), with the store
        self.store_parent = Path(store_parent or Path(settings.VAR_DIR) / "sandbox-sessions")
        self.store: WorkspaceStore | None = None
        self.budget: SessionBudget | None = None  # what its sessions may use together
        self.stopping = threading.Event()
        self.swept_at = 0.0

    def heartbeat(self) -> None:
        """Refresh the heartbeat of every live slot (a slot thread that died stops beating,
        so another worker's reaper requeues what it held, or answers its calls as lost)."""
        client = Q.connection()
        pipe = client.pipeline()
        for slot in self.slots:
            if slot.ident is not None and not slot.is_alive():
                continue
            pipe.set(Q.alive_key(slot.worker_id), "1", ex=Q.HEARTBEAT_TTL_S)
            pipe.sadd(Q.workers_key(self.runtime), slot.worker_id)
        for session_slot in self.session_slots:
            if session_slot.ident is not None and not session_slot.is_alive():
                continue
            pipe.set(Q.alive_key(session_slot.slot_id), "1", ex=Q.HEARTBEAT_TTL_S)
            pipe.sadd(routing.registry_key(self.runtime), session_slot.slot_id)
            pipe.set(
                routing.load_key(session_slot.slot_id),
                session_slot.sessions(),
                ex=Q.HEARTBEAT_TTL_S * 3,
            )
        pipe.execute()

    def reap(self) -> int:
        """Requeue the in-flight requests of workers whose heartbeat expired, answer the calls
        of dead session slots as lost; returns how many requests and calls. Every
        :data:`HOST_SWEEP_EVERY_S` (and whenever a slot died) it also removes what dead
        workers on this host left: their empty cgroups and their workspace stores."""
        client = Q.connection()
        moved = 0
        dead_sessions = routing.reap_dead_slots(self.runtime, client)
        if dead_sessions or time.monotonic() - self.swept_at > HOST_SWEEP_EVERY_S:
            self.swept_at = time.monotonic()
            cgroups.sweep_stale()
            sweep_dead_owners(self.store_parent)
        for raw_id in client.smembers(Q.workers_key(self.runtime)):
            worker_id = raw_id.decode()
            if client.exists(Q.alive_key(worker_id)):
                continue
            count = client.eval(
                REAP_SCRIPT,
                3,
                Q.processing_key(worker_id),
                Q.pending_key(self.runtime),
                Q.workers_key(self.runtime),
                worker_id,
            )
            if count:
                log.warning("requeued %d request(s) of dead sandbox worker %s", count, worker_id)
            moved += int(count)
        return moved + dead_sessions

    def start_session_slots(self) -> None:
        """Make the workspace store and start the session slots (:meth:`serve` does)."""
        if self.session_slot_count and not self.session_slots:
            # Each open session holds two descriptors here (its init's socket and pidfd).
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
            if soft < wanted:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            self.store = WorkspaceStore(self.store_parent / self.name)
            self.budget = SessionBudget(BudgetLimits.from_settings(), store=self.store)
            self.session_slots = [
                SessionSlot(
                    slot_id=f"{self.name}-s{index}",
                    runtime=self.runtime,
                    store=self.store,
                    stopping=self.stopping,
                    budget=self.budget,
                )
                for index in range(self.session_slot_count)
            ]
            for session_slot in self.session_slots:
                session_slot.start()

    def serve(self) -> None:
        """Run until :meth:`stop` (or SIGTERM through the command): heartbeat, reap, consume."""
        self.start_session_slots()
        self.heartbeat()
        metrics.SANDBOX_SLOTS.labels(self.runtime).set(len(self.slots))
        for slot in self.slots:
            slot.start()
        try:
            while not self.stopping.wait(HEARTBEAT_EVERY_S):
                try:
                    self.heartbeat()
                    self.reap()
                except (redis.RedisError, OSError) as exc:
                    log.warning("heartbeat failed: %s", exc)
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop every slot: queued requests it held go back to the queue; its sessions close
        (their next calls are answered ``closed``/``lost``); its workspace store goes."""
        self.stopping.set()
        metrics.SANDBOX_SLOTS.labels(self.runtime).set(0)
        for slot in [*self.slots, *self.session_slots]:
            if slot.is_alive() and slot is not threading.current_thread():
                slot.join(timeout=10)
        try:
            client = Q.connection()
            pipe = client.pipeline()
            for slot in self.slots:
                pipe.delete(Q.alive_key(slot.worker_id))
            for session_slot in self.session_slots:
                pipe.delete(Q.alive_key(session_slot.slot_id))
            pipe.execute()
            self.reap()  # anything a slot still held goes back to the queue
        except (redis.RedisError, OSError):
            pass
        if self.store is not None:
            self.store.close()
        if self.budget is not None:
            self.budget.close()
