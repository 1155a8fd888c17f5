"""An ASGI app whose worker cannot stop on its own: its first request starts a thread that is not
a daemon and never ends, so the worker's interpreter waits for it forever at exit (what a stuck
shutdown looks like from granian's main process; test_web_server_stops.py serves it)."""

from __future__ import annotations

import threading

_held = threading.Event()


def _hold_forever() -> None:
    threading.Event().wait()


async def application(scope, receive, send):
    if scope["type"] != "http":
        return
    if not _held.is_set():
        _held.set()
        threading.Thread(target=_hold_forever, name="refuses-to-stop").start()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"held"})
