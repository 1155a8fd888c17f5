"""What ``/healthz`` checks: what a console process needs to serve a request.

* ``database``: one ``SELECT 1`` on the default connection (SQLite file or PostgreSQL);
* ``redis``: a ``PING`` of ``settings.REDIS_URL`` (channel layer, cache, broker, sandbox queue);
* ``workers``, in a web server started by ``manage.py serve`` or ``crucible up``: every worker
  process of the server has warmed up (:mod:`core.readiness`); absent elsewhere.

Each check answers ``"ok"`` or why it failed, within :data:`TIMEOUT_S` seconds.
"""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import DatabaseError, connection

from core import readiness

TIMEOUT_S = 2.0  # a probe (Kubernetes: 1 s by default, 3 retries) must not hang on a dead peer


def database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"unreachable: {type(exc).__name__}: {exc}".strip()
    return "ok"


def redis_server() -> str:
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"unreachable: {type(exc).__name__}: {exc}"
    finally:
        client.close()
    return "ok"


def checks() -> dict[str, str]:
    """``{"database": "ok" | why, "redis": "ok" | why}``, and ``"workers": "ok" | why`` in a
    launched web server."""
    found = {"database": database(), "redis": redis_server()}
    if readiness.launched():
        found["workers"] = readiness.workers()
    return found
