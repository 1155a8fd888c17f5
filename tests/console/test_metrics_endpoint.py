"""GET /metrics of the web process: Prometheus text with the request metrics (django-prometheus)
and the gauges read at scrape time from the real database and Redis; the optional bearer token."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from console.celery import app
from core import queues
from sandboxes import queue as Q
from tasks_library.tasks import validate_task_versions
from tests.metrics import private_redis, samples, value
from tests.training.conftest import one_task_run
from training.tasks import runs_reconcile_task

pytestmark = pytest.mark.django_db


def get_metrics(client, **headers) -> str:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def test_metrics_is_prometheus_text_with_crucible_and_request_metrics(client):
    client.get("/healthz")  # a request's metrics are recorded as its response leaves
    text = get_metrics(client)
    names = {name for name, _labels in samples(text)}  # parses the whole exposition
    for name in (
        "crucible_runs",
        "crucible_sandbox_queue_depth",
        "crucible_sandbox_workers_live",
        "crucible_celery_queue_depth",
        "crucible_metrics_source_up",
        "django_http_requests_latency_seconds_by_view_method_bucket",
        "django_http_responses_total_by_status_view_method_total",
    ):
        assert name in names, name
    for queue in queues.ALL:
        assert value(text, "crucible_celery_queue_depth", queue=queue) is not None
    # the session's fixtures run resident python workers: live slots are counted
    assert value(text, "crucible_sandbox_workers_live", runtime="python") >= 1
    assert value(text, "crucible_metrics_source_up", source="database") == 1
    assert value(text, "crucible_metrics_source_up", source="redis") == 1


def test_the_request_counter_counts_requests_by_view_and_status(client):
    def healthz_200() -> float:
        return (
            value(
                get_metrics(client),
                "django_http_responses_total_by_status_view_method_total",
                method="GET",
                status="200",
                view="healthz",
            )
            or 0.0
        )

    before = healthz_200()
    for _ in range(3):
        assert client.get("/healthz").status_code == 200
    assert healthz_200() == before + 3
    missing = (
        value(
            get_metrics(client),
            "django_http_responses_total_by_status_view_method_total",
            method="GET",
            status="404",
            view="<unnamed view>",
        )
        or 0.0
    )
    assert client.get("/no/such/page/").status_code == 404
    assert (
        value(
            get_metrics(client),
            "django_http_responses_total_by_status_view_method_total",
            method="GET",
            status="404",
            view="<unnamed view>",
        )
        == missing + 1
    )


def test_runs_by_status_are_counted_at_scrape_time(client):
    before = value(get_metrics(client), "crucible_runs", status="pending")
    one_task_run("local")
    one_task_run("local")
    text = get_metrics(client)
    assert value(text, "crucible_runs", status="pending") == before + 2
    assert value(text, "crucible_runs", status="succeeded") is not None  # every status has a sample


def test_queue_depths_are_read_from_redis_at_scrape_time(client):
    with private_redis() as var:
        redis = Q.connection()
        for index in range(3):
            redis.lpush(Q.pending_key("python"), json.dumps({"id": f"waiting:{index}"}))
        # real Celery messages, routed as the app routes them, on this Redis
        with app.connection_for_write(f"redis+socket://{var / 'redis.sock'}") as connection:
            runs_reconcile_task.apply_async(connection=connection)
            runs_reconcile_task.apply_async(connection=connection)
            validate_task_versions.apply_async(args=([], {}), connection=connection)
        text = get_metrics(client)
    assert value(text, "crucible_sandbox_queue_depth", runtime="python") == 3
    assert value(text, "crucible_sandbox_queue_depth", runtime="node") == 0
    assert (
        value(text, "crucible_sandbox_workers_live", runtime="python") == 0
    )  # no worker on this Redis
    assert value(text, "crucible_celery_queue_depth", queue="control") == 2
    assert value(text, "crucible_celery_queue_depth", queue="validation") == 1
    assert value(text, "crucible_celery_queue_depth", queue="trainer") == 0


def test_redis_down_is_reported_not_a_500(client):
    with override_settings(REDIS_URL="unix:///tmp/crucible-no-such-redis.sock?db=0"):
        Q.connection.cache_clear()
        try:
            text = get_metrics(client)
        finally:
            Q.connection.cache_clear()
    assert value(text, "crucible_metrics_source_up", source="redis") == 0
    assert (
        value(text, "crucible_sandbox_queue_depth", runtime="python") is None
    )  # left out, not zero
    assert value(text, "crucible_metrics_source_up", source="database") == 1


@override_settings(CRUCIBLE_METRICS_TOKEN="s3cret-token")
def test_with_a_token_set_metrics_need_it(client):
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert b"crucible_" not in refused.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret-token").status_code == 401
    text = get_metrics(client, HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert value(text, "crucible_metrics_source_up", source="database") == 1


def test_without_a_token_metrics_need_no_login(client):
    assert client.get("/metrics").status_code == 200
    assert client.post("/metrics").status_code == 405  # read-only
