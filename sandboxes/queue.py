"""The execution queue in Redis: the client side, and the keys both sides share.

A caller pushes a request onto ``crucible:sandbox:<runtime>:pending`` and waits on
its own reply list. A worker (``sandbox_worker``) moves the request atomically
(``BLMOVE``) into its own ``processing`` list while it runs it, so a worker that
dies mid-execution leaves the request in Redis, never in a lost process: when the
worker's heartbeat key expires, any other worker's reaper moves its in-flight
requests back to ``pending`` with ``attempt`` raised by one. A request that comes
round a third time (its first worker and its retry both died) is answered
``infra_error``, never run again and never scored as the policy's failure.

Request: ``{"id", "reply_to", "runtime", "kind", "payload", "limits", "attempt"}``;
reply: ``{"id", "result": ExecutionResult.to_dict()}``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import uuid

import redis
from django.conf import settings

from core.broker import BROKER_ERRORS, await_broker, broker_retry, broker_wait_s
from sandboxes import result as R
from sandboxes.process import Limits

PREFIX = "crucible:sandbox"
MAX_ATTEMPTS = 2  # the first run and one retry on another worker
HEARTBEAT_TTL_S = 10
REPLY_TTL_S = 3600
NO_WORKER_GRACE_S = 20.0


def pending_key(runtime: str) -> str:
    return f"{PREFIX}:{runtime}:pending"


def processing_key(worker_id: str) -> str:
    return f"{PREFIX}:worker:{worker_id}:processing"


def alive_key(worker_id: str) -> str:
    return f"{PREFIX}:worker:{worker_id}:alive"


def workers_key(runtime: str) -> str:
    return f"{PREFIX}:{runtime}:workers"


SOCKET_TIMEOUT_S = 30.0
"""Seconds one Redis reply may take. The blocking reads of the queue and the sessions wait at most
2 s on the server, so a reply later than this means a connection that will never answer (a Redis
killed behind a socket that stayed open, a partition): it raises ``redis.TimeoutError``, which the
callers' broker wait retries, instead of blocking the caller for good."""


@functools.lru_cache(maxsize=1)
def connection() -> redis.Redis:
    """This process's Redis client (thread-safe: one connection per blocking call)."""
    return redis.Redis.from_url(
        settings.REDIS_URL,
        health_check_interval=30,
        socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=5,
    )


def live_workers(runtime: str) -> int:
    """How many workers of ``runtime`` have a fresh heartbeat."""
    client = connection()
    ids = client.smembers(workers_key(runtime))
    return sum(1 for wid in ids if client.exists(alive_key(wid.decode())))


def request(
    kind: str, payload: dict, *, runtime: str = "python", limits: Limits | None = None
) -> dict:
    """A request for :func:`run_many`."""
    return {
        "kind": kind,
        "runtime": runtime,
        "payload": payload,
        "limits": dataclasses.asdict(limits or Limits()),
        "attempt": 0,
    }


def request_limits(request: dict) -> Limits:
    """The limits a request carries (the inverse of :func:`request`; defaults for any left out)."""
    known = set(Limits.__dataclass_fields__)
    return Limits(**{k: v for k, v in (request.get("limits") or {}).items() if k in known})


class PendingBatch:
    """Requests queued by :func:`submit`, answered while the caller does other work.

    Redis going away does not lose the batch: queueing, and waiting for the answers, wait for it
    to come back (:func:`core.broker.await_broker`, bounded by
    ``CRUCIBLE_BROKER_WAIT_S``) and then queue again every request not answered yet (a Redis
    restarted empty lost them; one that kept them gets the same ids twice, and the second answer
    of an id is ignored).

    Raises:
        BrokerLost: Redis stayed away longer than the broker wait.
    """

    def __init__(self, requests: list[dict]):
        self.count = len(requests)
        self.client = connection()
        batch = uuid.uuid4().hex
        self.reply_to = f"{PREFIX}:reply:{batch}"
        self.by_id: dict[str, int] = {}
        self.runtimes: set[str] = set()
        self.messages: list[dict] = []
        for index, item in enumerate(requests):
            message = dict(item, id=f"{batch}:{index}", reply_to=self.reply_to)
            self.by_id[message["id"]] = index
            self.runtimes.add(message["runtime"])
            self.messages.append(message)
        broker_retry(lambda: self._push(range(self.count)), what="a sandbox batch")
        self.submitted = time.monotonic()

    def _push(self, indices) -> None:
        pipe = self.client.pipeline(transaction=False)
        for index in indices:
            message = self.messages[index]
            pipe.lpush(pending_key(message["runtime"]), json.dumps(message))
        if self.messages:
            pipe.execute()

    def wait(self, *, timeout_s: float | None = None) -> list[R.ExecutionResult]:
        """Every answer, in request order.

        Args:
            timeout_s: give up this many seconds after submission; None waits while
                any worker of the runtime is alive.

        Returns:
            One result per request. A request no live worker answered comes back as
            ``infra_error`` with a detail that names the command to start workers.
        """
        results: list[R.ExecutionResult | None] = [None] * self.count
        self._without_workers_since: float | None = None
        self._waiting = self.count
        detail: str | None = None
        outage: float | None = None  # when Redis went away (the broker wait counts from it)
        try:
            while detail is None and self._waiting:
                try:
                    detail = self._wait_once(results, timeout_s)
                    outage = None
                except BROKER_ERRORS as exc:
                    outage = outage or time.monotonic()
                    await_broker(
                        what="a sandbox batch", error=exc, deadline=outage + broker_wait_s()
                    )
                    unanswered = [i for i, result in enumerate(results) if result is None]
                    broker_retry(lambda todo=unanswered: self._push(todo), what="a sandbox batch")
        finally:
            if self._waiting:  # a list emptied by its last BLPOP is gone already
                try:
                    self.client.delete(self.reply_to)
                except BROKER_ERRORS:
                    pass  # it expires by itself (REPLY_TTL_S)
        return [
            r if r is not None else R.ExecutionResult(status=R.INFRA_ERROR, detail=detail or "")
            for r in results
        ]

    def _wait_once(self, results: list, timeout_s: float | None) -> str | None:
        """Take one answer into ``results`` (waiting up to 2 s for it); return why to stop waiting
        (no worker answered in time, none is alive), else None."""
        popped = self.client.blpop([self.reply_to], timeout=2)
        if popped is not None:
            reply = json.loads(popped[1])
            index = self.by_id.get(reply.get("id"))
            if index is not None and results[index] is None:
                results[index] = R.ExecutionResult.from_dict(reply["result"])
                self._waiting -= 1
            return None
        now = time.monotonic()
        if timeout_s is not None and now - self.submitted > timeout_s:
            return f"no sandbox worker answered within {timeout_s:.0f} s"
        if all(live_workers(runtime) for runtime in self.runtimes):
            self._without_workers_since = None
        elif self._without_workers_since is None:
            self._without_workers_since = now
        elif now - self._without_workers_since > NO_WORKER_GRACE_S:
            missing = sorted(r for r in self.runtimes if not live_workers(r))
            return (
                f"no live sandbox worker for {', '.join(missing)}; start one with "
                f"`python manage.py sandbox_worker --runtime {missing[0]}`"
            )
        return None


def submit(requests: list[dict]) -> PendingBatch:
    """Queue ``requests`` (from :func:`request`) now; collect the answers later with ``.wait()``."""
    return PendingBatch(requests)


def run_many(
    requests: list[dict], *, timeout_s: float | None = None, retry_infra_errors: bool = False
) -> list[R.ExecutionResult]:
    """Queue ``requests`` and wait for every answer, in order (see :meth:`PendingBatch.wait`).

    Args:
        retry_infra_errors: queue the requests answered ``infra_error`` once more
            (:func:`infra_errors_retried`); what fails again stays ``infra_error``.
    """
    if not requests:
        return []
    results = submit(requests).wait(timeout_s=timeout_s)
    if retry_infra_errors:
        results = infra_errors_retried(requests, results, timeout_s=timeout_s)
    return results


def infra_errors_retried(
    requests: list[dict], results: list[R.ExecutionResult], *, timeout_s: float | None = None
) -> list[R.ExecutionResult]:
    """``results`` (the answers to ``requests``, in order) with each ``infra_error`` answer
    replaced by a second run of its request; what fails again stays ``infra_error``.

    The queue already moves a request whose worker died to another worker; this second chance
    covers a batch that found no live worker for a moment. :func:`run_many` does it with
    ``retry_infra_errors``; a caller that waits on a :func:`submit` batch itself passes its
    answers here.
    """
    again = [i for i, result in enumerate(results) if result.status == R.INFRA_ERROR]
    if not again:
        return results
    retried = run_many([requests[i] for i in again], timeout_s=timeout_s)
    results = list(results)
    for i, result in zip(again, retried, strict=True):
        results[i] = result
    return results


def python_tests(
    program: str,
    test_source: str,
    entry_point: str,
    *,
    prompt: str = "",
    limits: Limits | None = None,
    files: dict[str, str] | None = None,
    verifier: str = "python-check",
    setup: str = "",
    environment: dict | None = None,
) -> dict:
    """A request to grade ``program`` on ``test_source`` with ``verifier``, beside the
    workspace ``files``, after the suite's ``setup`` code (see :meth:`PythonGrader.grade`), in
    ``environment`` (``Materialised.request_field()`` of :mod:`sandboxes.environments.build`:
    its ``queue`` names the runtime's workers); None: the host's Python, standard library
    only."""
    payload = {
        "program": program,
        "tests": test_source,
        "entry_point": entry_point,
        "prompt": prompt,
        "files": files or {},
        "verifier": verifier,
    }
    if setup:
        payload["setup"] = setup
    if environment:
        payload["environment"] = environment
    runtime = (environment or {}).get("queue") or "python"
    return request("python_tests", payload, runtime=runtime, limits=limits)


def javascript_tests(
    program: str,
    test_source: str,
    entry_point: str,
    *,
    prompt: str = "",
    limits: Limits | None = None,
    files: dict[str, str] | None = None,
    setup: str = "",
    environment: dict | None = None,
) -> dict:
    """A request to grade a JavaScript ``program`` on ``console.assert`` tests (runtime ``node``),
    in ``environment`` (its ``node_modules``; None: Node.js alone).

    Raises:
        ValueError: workspace ``files`` or ``setup`` code were given (the Node.js runner takes
            neither yet).
    """
    if files:
        raise ValueError("workspace files are supported by the Python verifiers only")
    if setup:
        raise ValueError("setup code is supported by the python-check verifier only")
    payload = {
        "program": program,
        "tests": test_source,
        "entry_point": entry_point,
        "prompt": prompt,
    }
    if environment:
        payload["environment"] = environment
    return request("javascript_tests", payload, runtime="node", limits=limits)
