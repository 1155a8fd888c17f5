"""Resident sandbox workers: consume the Redis queue, run each request in warm sandboxes.

One :class:`SandboxWorker` process holds ``concurrency`` slots. Each slot is a
thread with its own runtime executor (for Python a :class:`PythonGrader`: two
zygotes), its own worker id, heartbeat and ``processing`` list in Redis (see
:mod:`sandboxes.queue` for the keys and the retry rule). A zygote that dies
mid-execution is replaced at once and the request goes back to the queue for
another slot; a whole worker process that dies (``kill -9``) stops heart-beating,
and any other worker's reaper requeues what it held.

Before it joins the pool a worker runs one trivial execution end to end
(:func:`self_check`): a host or pod where the sandbox cannot be built, or where its
executions cannot set up, refuses to start with the reason instead of answering every
request with a failure.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

import redis

from console.core import metrics
from console.core.logcontext import log_context, log_context_bind
from sandboxes import pool_stats
from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.resident import SandboxSetupFailed, ZygoteDied

log = logging.getLogger(__name__)
HEARTBEAT_EVERY_S = 2.0

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
    """The runtime's executor: an object with ``run(request) -> ExecutionResult`` and ``close()``."""
    from sandboxes.runtimes import executor_for

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
        result = executor.run(dict(SELF_CHECKS[runtime](), id="self-check"))
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
            request["id"], request["reply_to"]  # noqa: B018 - a request without them cannot be answered
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
            except Exception as exc:  # noqa: BLE001 - a bad request must not kill the slot
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
    """``concurrency`` slots of one runtime, their heartbeats, and a reaper for dead peers."""

    def __init__(self, *, runtime: str = "python", concurrency: int = 2) -> None:
        self.runtime = runtime
        self.name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.slots = [Slot(self, i) for i in range(max(1, concurrency))]
        self.stopping = threading.Event()

    def heartbeat(self) -> None:
        """Refresh the heartbeat of every live slot (a slot thread that died stops beating,
        so another worker's reaper requeues what it held)."""
        client = Q.connection()
        pipe = client.pipeline()
        for slot in self.slots:
            if slot.ident is not None and not slot.is_alive():
                continue
            pipe.set(Q.alive_key(slot.worker_id), "1", ex=Q.HEARTBEAT_TTL_S)
            pipe.sadd(Q.workers_key(self.runtime), slot.worker_id)
        pipe.execute()

    def reap(self) -> int:
        """Requeue the in-flight requests of workers whose heartbeat expired; returns how many."""
        client = Q.connection()
        moved = 0
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
        return moved

    def serve(self) -> None:
        """Run until :meth:`stop` (or SIGTERM through the command): heartbeat, reap, consume."""
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
        self.stopping.set()
        metrics.SANDBOX_SLOTS.labels(self.runtime).set(0)
        for slot in self.slots:
            if slot.is_alive() and slot is not threading.current_thread():
                slot.join(timeout=10)
        try:
            client = Q.connection()
            pipe = client.pipeline()
            for slot in self.slots:
                pipe.delete(Q.alive_key(slot.worker_id))
            pipe.execute()
            self.reap()  # anything a slot still held goes back to the queue
        except (redis.RedisError, OSError):
            pass
