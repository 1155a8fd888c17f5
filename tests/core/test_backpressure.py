"""Backpressure (core/backpressure.py): past capacity a request is answered 503 with Retry-After
at once, not queued until it times out; websockets and the probes are not counted."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from console.management.stack import web_server_argv
from core.backpressure import Backpressure
from tests.ports import free_port, wait_answering

ROOT = Path(__file__).resolve().parents[2]


def _app(hold_s: float):
    async def app(scope, receive, send):
        await asyncio.sleep(hold_s)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    return app


async def _call(app, path: str = "/api/runs/", kind: str = "http") -> tuple[int | None, dict]:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    await app({"type": kind, "path": path}, receive, send)
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    return (start["status"], dict(start["headers"])) if start else (None, {})


def test_full_queue_refuses_at_once_and_the_queue_is_served_in_order():
    async def scenario():
        app = Backpressure(_app(0.2), concurrency=1, max_queue=1, queue_timeout_s=5)
        started = time.monotonic()
        first = asyncio.create_task(_call(app))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(_call(app))
        await asyncio.sleep(0.01)
        status, headers = await _call(app)  # one running, one waiting: refused
        refused_after = time.monotonic() - started
        assert (status, headers[b"retry-after"]) == (503, b"1") and refused_after < 0.1
        assert [(await first)[0], (await second)[0]] == [200, 200]
        assert (app.admitted, app.refused, app.running) == (2, 1, 0)

    asyncio.run(scenario())


def test_a_request_waiting_past_the_queue_timeout_is_refused():
    async def scenario():
        app = Backpressure(_app(0.5), concurrency=1, max_queue=8, queue_timeout_s=0.05)
        first = asyncio.create_task(_call(app))
        await asyncio.sleep(0.01)
        started = time.monotonic()
        assert (await _call(app))[0] == 503
        assert time.monotonic() - started < 0.3
        assert (await first)[0] == 200 and app.running == 0 and not app._waiters

    asyncio.run(scenario())


def test_websockets_and_probes_are_not_counted():
    async def scenario():
        app = Backpressure(_app(0.3), concurrency=1, max_queue=0, queue_timeout_s=1)
        busy = asyncio.create_task(_call(app))
        await asyncio.sleep(0.01)
        probes = [
            asyncio.create_task(_call(app, path, kind))
            for path, kind in (
                ("/healthz", "http"),
                ("/livez", "http"),
                ("/ws/runs/1/", "websocket"),
            )
        ]
        assert (await _call(app))[0] == 503  # the one slot is busy, no room to wait
        # the probes and the websocket were let through beside it, none refused
        # (the websocket's stand-in app answers an http-style start only for http scopes)
        assert [(await probe)[0] for probe in probes] == [200, 200, None]
        assert (await busy)[0] == 200 and (app.admitted, app.refused) == (1, 1)

    asyncio.run(scenario())


def test_an_overloaded_server_answers_503_with_retry_after_quickly():
    """granian (the launcher's command line) serving a 200 ms request with room for one running
    and two waiting, under 24 requests at once: every request is answered (no timeout, no 500),
    the overflow with 503 and Retry-After within a second, and the admitted ones with 200."""
    port = free_port()
    argv = web_server_argv(
        "127.0.0.1", port, workers=1, app="tests.core.backpressure_app:application"
    )
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/api/runs/"
    try:
        wait_answering(proc, base, seconds=30)

        def get(_):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(base, timeout=10) as response:
                    return response.status, None, time.monotonic() - started
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers.get("Retry-After"), time.monotonic() - started

        with ThreadPoolExecutor(24) as pool:
            answers = list(pool.map(get, range(24)))
    finally:
        proc.terminate()
        proc.wait(10)
    statuses = sorted({status for status, _retry, _s in answers})
    assert statuses == [200, 503], answers
    refused = [(retry, seconds) for status, retry, seconds in answers if status == 503]
    assert all(retry == "2" for retry, _s in refused), refused
    assert max(seconds for _retry, seconds in refused) < 1.0, refused
    # the first one runs (200 ms), the next waits its turn within the 300 ms limit
    assert sum(1 for status, _r, _s in answers if status == 200) >= 2, answers
