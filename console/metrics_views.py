"""``GET /metrics``: the web process's Prometheus metrics, and gauges read at scrape time.

The request metrics (count and latency by view name, method and status) are
django-prometheus's middleware (``django_http_*``). :class:`CrucibleCollector` adds, read
from the database and Redis while Prometheus scrapes, so they are current:

* ``crucible_runs{status}``: training runs by status;
* ``crucible_sandbox_queue_depth{runtime}``: requests waiting in
  ``crucible:sandbox:<runtime>:pending``;
* ``crucible_sandbox_workers_live{runtime}``: sandbox worker slots with a fresh heartbeat;
* ``crucible_celery_queue_depth{queue}``: messages waiting in each Celery queue (its Redis lists);
* ``crucible_metrics_source_up{source}``: 1 when the database / Redis answered this scrape, else 0
  (and that source's gauges are left out rather than reported as zero).

Open to anyone in the embedded default; with ``CRUCIBLE_METRICS_TOKEN`` set, a request needs
``Authorization: Bearer <token>`` (401 otherwise).
"""

from __future__ import annotations

import functools
import hmac
import threading

import redis
from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from kombu.transport.redis import Channel as RedisChannel
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from core import queues
from sandboxes import queue as Q
from sandboxes.pool_stats import known_runtimes
from training.models import TrainingRun


def celery_queue_keys(queue: str) -> list[str]:
    """The Redis lists of a Celery queue: kombu keeps one per priority step (``name``,
    ``name\\x06\\x163``...)."""
    return [
        queue if step == 0 else f"{queue}{RedisChannel.sep}{step}"
        for step in RedisChannel.priority_steps
    ]


class CrucibleCollector:
    """Gauges of the whole installation, read at scrape time (see the module docstring)."""

    def describe(self):
        # Names only: registering must not query the database or Redis.
        return [self._runs(), *self._redis_families(), self._up()]

    @staticmethod
    def _runs() -> GaugeMetricFamily:
        return GaugeMetricFamily("crucible_runs", "Training runs by status.", labels=["status"])

    @staticmethod
    def _redis_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "crucible_sandbox_queue_depth",
                "Sandbox requests waiting in the runtime's queue.",
                labels=["runtime"],
            ),
            GaugeMetricFamily(
                "crucible_sandbox_workers_live",
                "Sandbox worker slots of the runtime with a fresh heartbeat.",
                labels=["runtime"],
            ),
            GaugeMetricFamily(
                "crucible_celery_queue_depth",
                "Messages waiting in the Celery queue.",
                labels=["queue"],
            ),
        )

    @staticmethod
    def _up() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "crucible_metrics_source_up",
            "1 when the source answered this scrape, else 0.",
            labels=["source"],
        )

    def collect(self):
        up = self._up()
        try:
            counts = dict(
                TrainingRun.objects.order_by()
                .values("status")
                .annotate(n=Count("pk"))
                .values_list("status", "n")
            )
        except DatabaseError:
            up.add_metric(["database"], 0)
        else:
            runs = self._runs()
            for status, _label in TrainingRun.STATUSES:
                runs.add_metric([status], counts.get(status, 0))
            up.add_metric(["database"], 1)
            yield runs
        try:
            client = _redis_client(settings.REDIS_URL)
            runtimes = known_runtimes()
            pipe = client.pipeline(transaction=False)
            for runtime in runtimes:
                pipe.llen(Q.pending_key(runtime))
                pipe.smembers(Q.workers_key(runtime))
            for queue in queues.ALL:
                for key in celery_queue_keys(queue):
                    pipe.llen(key)
            answers = iter(pipe.execute())
            pending, registered = {}, {}
            for runtime in runtimes:
                pending[runtime] = next(answers)
                registered[runtime] = sorted(raw.decode() for raw in next(answers))
            celery_depth = {
                queue: sum(next(answers) for _key in celery_queue_keys(queue))
                for queue in queues.ALL
            }
            pipe = client.pipeline(transaction=False)
            for (
                runtime
            ) in runtimes:  # a registered worker slot is live while its heartbeat key exists
                for worker_id in registered[runtime]:
                    pipe.exists(Q.alive_key(worker_id))
            beats = iter(pipe.execute())
            live = {
                runtime: sum(next(beats) for _id in registered[runtime]) for runtime in runtimes
            }
        except (redis.RedisError, OSError):
            up.add_metric(["redis"], 0)
        else:
            depth, workers, celery = self._redis_families()
            for runtime in runtimes:
                depth.add_metric([runtime], pending[runtime])
                workers.add_metric([runtime], live[runtime])
            for queue in queues.ALL:
                celery.add_metric([queue], celery_depth[queue])
            up.add_metric(["redis"], 1)
            yield from (depth, workers, celery)
        yield up


@functools.lru_cache(maxsize=4)
def _redis_client(url: str) -> redis.Redis:
    """A client with timeouts: a Redis that hangs costs a scrape 2 s, not the scraper's whole
    timeout."""
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)


_collector_lock = threading.Lock()
_collector_registered = False


def _register_collector() -> None:
    """Add :class:`CrucibleCollector` to the default registry, once, in the process that serves
    /metrics (registered on first use, not at import, so no other process scrapes the database)."""
    global _collector_registered
    with _collector_lock:
        if not _collector_registered:
            REGISTRY.register(CrucibleCollector())
            _collector_registered = True


def _unauthorized() -> HttpResponse:
    response = HttpResponse(
        "a bearer token is required: Authorization: Bearer <CRUCIBLE_METRICS_TOKEN>\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="crucible-metrics"'
    return response


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition (text format, or OpenMetrics when the scraper asks for it)."""
    token = settings.CRUCIBLE_METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            return _unauthorized()
    _register_collector()
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(REGISTRY), content_type=content_type)
