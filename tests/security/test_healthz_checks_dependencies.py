"""``/healthz`` checks what the console needs (the database and Redis), not only that the process
answers: with Redis unreachable it says 503 and why."""

from __future__ import annotations

import pytest
from django.test import Client

from console.management.stack import port_free


@pytest.mark.django_db
def test_healthz_is_ok_with_database_and_redis():
    response = Client().get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "service": "crucible-console",
        "ok": True,
        "checks": {"database": "ok", "redis": "ok"},
    }


@pytest.mark.django_db
def test_healthz_is_503_when_redis_is_down(settings):
    # A port nothing listens on: the Redis the console would use is down.
    port = next(p for p in range(16390, 16490) if port_free(p))
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["service"] == "crucible-console" and body["ok"] is False
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("unreachable: ConnectionError")
    # the liveness probe's endpoint stays 200: restarting the pod would not bring Redis back
    assert Client().get("/livez").json() == {"service": "crucible-console", "ok": True}
