"""Helpers of the metrics tests: read a Prometheus endpoint with prometheus_client's own parser,
and a private Redis server for tests that must own a whole queue."""

from __future__ import annotations

import shutil
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from console.management.stack import Stack
from sandboxes import queue as Q


def samples(text: str) -> dict[tuple, float]:
    """``{(sample name, frozenset(labels)): value}`` of an exposition (the parser rejects a
    malformed one)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text_or_samples, name: str, **labels) -> float | None:
    """One sample's value, None when the exposition has no such sample."""
    found = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    return found.get((name, frozenset(labels.items())))


def scrape(port: int, *, timeout_s: float = 30.0) -> str:
    """GET http://127.0.0.1:PORT/metrics, waiting for the endpoint to come up."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_for(predicate, *, timeout_s: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout_s:.0f} s"
        time.sleep(0.1)


@contextmanager
def private_redis():
    """A Redis server of its own (the embedded one, in a fresh var dir) that this process's
    settings point at for the block; yields that var dir, for child processes'
    ``CRUCIBLE_VAR_DIR`` (they then find the same server)."""
    var = Path(
        tempfile.mkdtemp(prefix="crucible-", dir="/tmp")
    )  # short: a Unix socket path is limited
    sock = var / "redis.sock"
    with override_settings(
        VAR_DIR=var,
        EMBEDDED_REDIS=True,
        EMBEDDED_REDIS_SOCKET=sock,
        REDIS_URL=f"unix://{sock}?db=0",
    ):
        Q.connection.cache_clear()
        try:
            with Stack() as stack:
                stack.redis()
                yield var
        finally:
            Q.connection.cache_clear()
    shutil.rmtree(var, ignore_errors=True)
