"""A run whose launch message was lost (the broker restarted empty) does not stay ``pending``:
the reconcile loop reads the real broker (the session's Redis), sends the launch again once, and
leaves a run whose launch is still queued alone."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from console.celery import app
from tests.training.conftest import one_task_run
from training import reconcile
from training.inflight import (
    UNACKED_KEY,
    _launched_run,
    launches_in_flight,
    queue_keys,
)
from training.models import TrainingRun
from training.reconcile import runs_reconcile
from training.tasks import run_launch

QUEUES = ["trainer", "control"]


def drop_launches(run_id: int) -> int:
    """Remove every ``run_launch`` message of ``run_id`` from the broker (what an empty restart
    does to it); returns how many there were. Other tests' runs reuse ids in their own
    transactions, so their leftovers must not count here."""
    removed = 0
    with app.connection_for_write() as connection:
        client = connection.default_channel.client
        for key in (key for queue in QUEUES for key in queue_keys(queue)):
            for raw in client.lrange(key, 0, -1):
                if _launched_run(raw) == run_id:
                    removed += client.lrem(key, 0, raw)
        for tag, raw in client.hgetall(UNACKED_KEY).items():
            if _launched_run(raw) == run_id:
                removed += client.hdel(UNACKED_KEY, tag)
    return removed


def pending_since(run: TrainingRun, seconds: float) -> None:
    TrainingRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.mark.django_db
def test_a_pending_run_whose_launch_was_lost_is_launched_again_once():
    run = one_task_run()
    drop_launches(run.pk)
    run_launch.delay(run.pk)  # launched while no worker ran...
    assert run.pk in launches_in_flight(QUEUES)
    pending_since(run, reconcile.PENDING_GRACE_S + 5)
    assert runs_reconcile().get(run.pk) == "waiting"  # ...its message still queued: left alone

    assert drop_launches(run.pk) == 1  # ...then the broker restarted empty
    try:
        assert runs_reconcile()[run.pk] == "redispatched"
        assert run.pk in launches_in_flight(QUEUES)
        # the next pass finds the new message queued: no second one
        assert runs_reconcile()[run.pk] == "waiting"
        with app.connection_for_read() as connection:
            client = connection.default_channel.client
            queued = [r for r in client.lrange("trainer", 0, -1) if _launched_run(r) == run.pk]
        assert len(queued) == 1
        run.refresh_from_db()
        assert run.status == TrainingRun.PENDING
        assert run.summary["launch_redispatches"] == 1
    finally:
        drop_launches(run.pk)


@pytest.mark.django_db
def test_a_fresh_pending_run_is_left_to_its_own_launch():
    run = one_task_run()
    drop_launches(run.pk)
    pending_since(run, reconcile.PENDING_GRACE_S - 30)
    assert run.pk not in runs_reconcile()
    assert run.pk not in launches_in_flight(QUEUES)


def test_only_run_launch_messages_name_a_run():
    """A message of another task, or one that is not JSON, names no run; an unacked entry
    (``[message, exchange, routing_key]``) and a keyword-argument launch do."""

    def launch(**headers) -> str:
        return json.dumps({"headers": {"task": "training.tasks.run_launch", **headers}})

    assert _launched_run(b"not json") is None
    assert _launched_run(b'{"headers": {"task": "other", "argsrepr": "(8,)"}}') is None
    assert _launched_run(launch(kwargsrepr="{'run_id': 9}")) == 9
    assert _launched_run(f'[{launch(argsrepr="(11,)")}, "", "q"]') == 11
