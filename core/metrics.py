"""Prometheus metrics of Crucible's processes (``prometheus_client``): definitions and hooks.

Each process records what it does in its own registry; the recording points call the small
functions here (one line each). Who serves what:

* the web process: ``GET /metrics`` (console/metrics_views.py) with the request metrics of
  django-prometheus and gauges read from the database and Redis at scrape time;
* the Celery worker, ``sandbox_worker`` and the trainer (``run_trainer``): their own HTTP
  endpoint when ``CRUCIBLE_METRICS_PORT`` is set (:func:`serve_from_env`).

Names follow Prometheus' conventions (``crucible_`` prefix, ``_total`` counters, the unit as
suffix); the sandbox latency is in milliseconds, as the console's ``sandbox/latency_p99_ms``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

METRICS_PORT_ENV = "CRUCIBLE_METRICS_PORT"

# --- sandbox workers (sandboxes/worker.py) -----------------------------------------------------

SANDBOX_LATENCY_BUCKETS_MS = (
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10_000,
    30_000,
    60_000,
)
"""Bucket bounds in ms: a warm-zygote execution takes a few ms, a timed-out one up to a minute."""

SANDBOX_EXECUTIONS = Counter(
    "crucible_sandbox_executions",
    "Executions answered by this sandbox worker, by runtime, request kind and "
    "result status (ok, failed, timeout, infra_error...).",
    ["runtime", "kind", "status"],
)
SANDBOX_LATENCY_MS = Histogram(
    "crucible_sandbox_execution_latency_ms",
    "Time a slot spent on one request, from taking it off the queue "
    "to pushing its answer, in milliseconds.",
    ["runtime"],
    buckets=SANDBOX_LATENCY_BUCKETS_MS,
)
# livesum: under the local autoscaler the worker processes are children (see serve_from_env).
SANDBOX_SLOTS = Gauge(
    "crucible_sandbox_slots",
    "Slots (concurrent executions) of this sandbox worker.",
    ["runtime"],
    multiprocess_mode="livesum",
)
SANDBOX_BUSY_SLOTS = Gauge(
    "crucible_sandbox_busy_slots",
    "Slots running a request now.",
    ["runtime"],
    multiprocess_mode="livesum",
)


def sandbox_execution_observe(*, runtime: str, kind: str, status: str, latency_ms: float) -> None:
    """Count one answered request and its latency (``latency_ms``: milliseconds)."""
    SANDBOX_EXECUTIONS.labels(runtime, kind or "unknown", status).inc()
    SANDBOX_LATENCY_MS.labels(runtime).observe(latency_ms)


# --- trainer (training/trainer.py) -------------------------------------------------------------

TRAINER_PHASES = {
    "generation": "timing/generation_s",
    "sandbox": "timing/sandbox_s",
    "grading": "timing/grading_s",
    "update": "timing/update_s",
}
"""Phase label -> the step metric (seconds) the trainer records for it; as the run page's time
split."""

TRAINER_STEP = Gauge(
    "crucible_trainer_step",
    "Last RL step the trainer recorded.",
    ["run_id"],
    multiprocess_mode="mostrecent",
)
TRAINER_PHASE_SECONDS = Histogram(
    "crucible_trainer_step_phase_seconds",
    "Seconds of each RL step spent per phase: generation, sandbox (not "
    "hidden by generation), grading, update.",
    ["run_id", "phase"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
)
TRAINER_REWARD_MEAN = Gauge(
    "crucible_trainer_reward_mean",
    "Mean reward of the last step's scored trajectories.",
    ["run_id"],
    multiprocess_mode="mostrecent",
)
TRAINER_TOKENS_PER_SECOND = Gauge(
    "crucible_trainer_tokens_per_second",
    "Tokens the policy generated in the last step over the step's time (the sum of its phases).",
    ["run_id"],
    multiprocess_mode="mostrecent",
)


def trainer_step_observe(*, run_id: int, step: int, metrics: dict) -> None:
    """Publish one recorded step: ``metrics`` as stored on its ``StepMetric`` (``reward/mean``,
    ``timing/*_s`` in seconds, ``tokens/generated``). Keys that are missing are skipped."""
    run = str(run_id)
    seconds = 0.0
    for phase, key in TRAINER_PHASES.items():
        value = metrics.get(key)
        if isinstance(value, (int, float)):
            TRAINER_PHASE_SECONDS.labels(run, phase).observe(value)
            seconds += value
    if isinstance(metrics.get("reward/mean"), (int, float)):
        TRAINER_REWARD_MEAN.labels(run).set(metrics["reward/mean"])
    tokens = metrics.get("tokens/generated")
    if isinstance(tokens, (int, float)) and seconds > 0:
        TRAINER_TOKENS_PER_SECOND.labels(run).set(tokens / seconds)
    TRAINER_STEP.labels(run).set(step)  # last: a scrape that sees this step sees its values too


# --- Celery tasks (signals, connected in console/celery.py) ------------------------------------

CELERY_TASKS = Counter(
    "crucible_celery_tasks",
    "Celery tasks this worker ran, by task name and state: started, then success, "
    "failure, retry... (Celery's state names).",
    ["task", "state"],
)
CELERY_TASK_SECONDS = Histogram(
    "crucible_celery_task_duration_seconds",
    "Run time of Celery tasks.",
    ["task"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600, 14_400),
)
_task_started: dict[str, float] = {}


def celery_task_prerun(sender=None, task_id=None, task=None, **_kwargs) -> None:
    """``task_prerun`` handler: count the start and note the time."""
    CELERY_TASKS.labels(getattr(task, "name", str(sender)), "started").inc()
    _task_started[task_id] = time.monotonic()


def celery_task_postrun(sender=None, task_id=None, task=None, state=None, **_kwargs) -> None:
    """``task_postrun`` handler: count the outcome (``state``: SUCCESS, FAILURE...) and the run
    time."""
    name = getattr(task, "name", str(sender))
    CELERY_TASKS.labels(name, (state or "unknown").lower()).inc()
    began = _task_started.pop(task_id, None)
    if began is not None:
        CELERY_TASK_SECONDS.labels(name).observe(time.monotonic() - began)


# --- serving ------------------------------------------------------------------------------------


class _ProcessAndChildren:
    """This process's registry merged with what its child processes wrote (prometheus_client's
    multiprocess files), so one endpoint shows both under the same metric names."""

    def __init__(self, path: str) -> None:
        self.children = MultiProcessCollector(None, path=path)

    def collect(self):
        families: dict = {}
        for family in [*REGISTRY.collect(), *self.children.collect()]:
            if family.name in families:
                families[family.name].samples.extend(family.samples)
            else:
                families[family.name] = family
        return list(families.values())


_served_port: int | None = None
_serve_lock = threading.Lock()


def metrics_port_from_env() -> int | None:
    """``CRUCIBLE_METRICS_PORT`` as a port number, None when unset or empty.

    Raises:
        ImproperlyConfigured: the value is not an integer in 1..65535.
    """
    raw = os.environ.get(METRICS_PORT_ENV, "").strip()
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ImproperlyConfigured(f"{METRICS_PORT_ENV}={raw!r} is not a port number (1..65535)")
    return port


def serve_from_env(process: str) -> int | None:
    """Serve this process's metrics over HTTP (``GET /metrics`` or ``/``) on
    ``CRUCIBLE_METRICS_PORT``.

    Once per process; None when the variable is unset. Processes this one starts afterwards
    (the local autoscaler's sandbox workers, a Celery worker's local trainers) must not bind
    the same port: the variable is removed from this process's environment and replaced by
    ``PROMETHEUS_MULTIPROC_DIR``, a fresh directory where the children's prometheus_client
    writes its values, served here with this process's own. Under torchrun only local rank 0
    serves.

    Args:
        process: what this process is, for the error message.

    Returns:
        The port, or None when nothing is served.

    Raises:
        ImproperlyConfigured: a bad port number, or the port is taken.
    """
    global _served_port

    port = metrics_port_from_env()
    if port is None or os.environ.get("LOCAL_RANK", "0") != "0":
        return _served_port
    with _serve_lock:
        if _served_port is not None:
            return _served_port
        children = tempfile.mkdtemp(prefix="crucible-metrics-")
        atexit.register(shutil.rmtree, children, ignore_errors=True)
        try:
            start_http_server(port, registry=_ProcessAndChildren(children))
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{process}: cannot serve metrics on {METRICS_PORT_ENV}={port} "
                f"({exc.strerror or exc}); choose a free port"
            ) from exc
        os.environ.pop(METRICS_PORT_ENV, None)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = children
        _served_port = port
    return port


def serve_for_command(process: str) -> int | None:
    """:func:`serve_from_env` for a management command: a bad or taken port stops the command with a
    ``CommandError`` (a message, not a traceback)."""
    try:
        return serve_from_env(process)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
