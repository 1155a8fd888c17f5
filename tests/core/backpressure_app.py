"""A tiny ASGI application behind :class:`core.backpressure.Backpressure`, for the overload test:
each request holds a thread for 200 ms (as a sync view does); one runs at a time, two may wait
300 ms at most."""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async

from core.backpressure import Backpressure

WORK_S = 0.2


def _work() -> None:
    time.sleep(WORK_S)


async def slow(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await sync_to_async(_work, thread_sensitive=False)()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"done"})


application = Backpressure(slow, concurrency=1, max_queue=2, queue_timeout_s=0.3, retry_after_s=2)
