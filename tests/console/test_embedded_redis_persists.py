"""The embedded Redis keeps what must survive a restart: a Celery message queued while no worker
ran (a validation job, a launch) is still queued after Redis stops and starts again, and after it
is killed (the append-only file is fsynced every second). A Redis of its own, in a var directory
of its own."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest
import redis
from django.test import override_settings

from console.management.stack import Stack


@pytest.fixture
def var_dir():
    # A short path: a Unix socket's path must fit in 107 bytes.
    with tempfile.TemporaryDirectory(prefix="crv-", dir="/tmp") as path:
        yield Path(path)


def embedded(var_dir: Path):
    sock = var_dir / "redis.sock"
    return override_settings(
        VAR_DIR=var_dir,
        EMBEDDED_REDIS=True,
        EMBEDDED_REDIS_SOCKET=sock,
        REDIS_URL=f"unix://{sock}?db=0",
    )


def test_a_queued_message_survives_a_restart_and_a_kill_of_the_embedded_redis(var_dir):
    with embedded(var_dir):
        client = redis.Redis(unix_socket_path=str(var_dir / "redis.sock"))
        with Stack() as stack:
            stack.redis()
            client.lpush("validation", b"a validation job's message")
        with Stack() as stack:  # stopped (SIGTERM) and started again
            stack.redis()
            assert client.lrange("validation", 0, -1) == [b"a validation job's message"]
            client.lpush("trainer", b"a launch")
            time.sleep(1.5)  # appendfsync everysec
            (name, proc) = stack.started[-1]
            assert name == "redis"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        with Stack() as stack:
            stack.redis()
            assert client.lrange("trainer", 0, -1) == [b"a launch"]
            assert client.lrange("validation", 0, -1) == [b"a validation job's message"]
