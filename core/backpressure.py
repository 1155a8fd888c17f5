"""Backpressure for the console's HTTP requests: a quick 503 with ``Retry-After`` past capacity,
instead of a queue that grows until every client times out.

:class:`Backpressure` wraps the ASGI application of one web worker process. At most
``concurrency`` HTTP requests run in the application at once (their sync views each hold a
thread and, on PostgreSQL, a pooled connection); the next ones wait in arrival order. A request
that would wait behind ``max_queue`` others, or that has waited ``queue_timeout_s`` seconds
without its turn, is answered ``503 Service Unavailable`` with ``Retry-After`` (seconds) at
once, without reaching Django: the server stays responsive for the requests it admits, and a
client (a browser's retry, a script's back-off) learns when to come back. Websockets (long-lived,
event-driven) and the probes (``/healthz``, ``/livez``: a liveness probe must not fail because
the pod is busy) are not counted.

Settings (per worker process, ``console/settings.py``): ``CRUCIBLE_WEB_CONCURRENCY``,
``CRUCIBLE_WEB_MAX_QUEUE``, ``CRUCIBLE_WEB_QUEUE_TIMEOUT_MS``, ``CRUCIBLE_WEB_RETRY_AFTER_S``.
"""

from __future__ import annotations

import asyncio
import collections
import json

EXEMPT_PATHS = frozenset({"/healthz", "/livez"})


class Backpressure:
    """ASGI middleware bounding the HTTP requests in flight in one process (module docstring).

    Args:
        app: the ASGI application (Channels' protocol router).
        concurrency: requests let into ``app`` at once.
        max_queue: requests that may wait for a turn; one more is refused at once.
        queue_timeout_s: seconds a request may wait for its turn before it is refused.
        retry_after_s: the ``Retry-After`` of a refusal, in whole seconds.

    ``admitted`` and ``refused`` count requests since the start (for tests and logs).
    """

    def __init__(
        self,
        app,
        *,
        concurrency: int,
        max_queue: int,
        queue_timeout_s: float,
        retry_after_s: int = 1,
    ) -> None:
        self.app = app
        self.concurrency = max(1, concurrency)
        self.max_queue = max(0, max_queue)
        self.queue_timeout_s = queue_timeout_s
        self.retry_after_s = max(1, int(retry_after_s))
        self.running = 0
        self.admitted = 0
        self.refused = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if not await self._acquire():
            self.refused += 1
            await self._refuse(send)
            return
        self.admitted += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self._release()

    async def _acquire(self) -> bool:
        if self.running < self.concurrency and not self._waiters:
            self.running += 1
            return True
        if len(self._waiters) >= self.max_queue:
            return False
        turn = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.queue_timeout_s)
        except TimeoutError:
            if turn.done():  # given the turn just as the wait ran out: keep it
                return True
            self._waiters.remove(turn)
            turn.cancel()
            return False
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # handed a slot it will never use
            elif turn in self._waiters:
                self._waiters.remove(turn)
            raise
        return True

    def _release(self) -> None:
        # The slot passes straight to the oldest waiter (running stays the same), so a request
        # arriving now cannot overtake the queue.
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.running -= 1

    async def _refuse(self, send) -> None:
        body = json.dumps(
            {
                "field": None,
                "error": "the server is at capacity; retry after "
                f"{self.retry_after_s} s (Retry-After)",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(self.retry_after_s).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
