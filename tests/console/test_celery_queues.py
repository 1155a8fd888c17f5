"""Celery queues by kind of work: each task's route, a real worker that consumes only its queue
(and serves its task metrics, logs JSON), the embedded stack filling in unconsumed queues, a launch
that a second delivery cannot repeat, and the beat's clean-up of expired sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import connection
from django.utils import timezone

import console.tasks
import tasks_library.tasks  # noqa: F401 - registers its task with the app
from console.celery import app
from console.management.stack import Stack, celery_queues_consumed
from core import queues
from sandboxes import queue as Q
from tasks_library.tasks import validate_task_versions
from tests.database import child_env
from tests.metrics import scrape, value, wait_for
from tests.ports import free_port
from tests.training.conftest import one_task_run
from tests.training.test_reconcile_local import as_launched, spawn, stand_in_trainer  # noqa: F401 (fixture)
from training import services
from training.models import RunTransition, TrainingRun
from training.tasks import run_launch, runs_reconcile_task

ROOT = Path(__file__).resolve().parents[2]


def queue_of(name: str, *args, **kwargs) -> str:
    """The queue Celery's own router gives a task sent with these arguments."""
    return app.amqp.router.route({}, name, args, kwargs)["queue"].name


@pytest.mark.django_db
def test_every_task_lands_on_the_queue_for_its_kind_of_work():
    local, k8s = one_task_run("local"), one_task_run("kubernetes")
    assert (
        queue_of("training.tasks.run_launch", local.pk) == queues.TRAINER
    )  # supervises the trainer process
    assert queue_of("training.tasks.run_launch", run_id=local.pk) == queues.TRAINER
    assert queue_of("training.tasks.run_launch", k8s.pk) == queues.CONTROL  # one API call
    expected = {
        "training.tasks.runs_reconcile_task": queues.CONTROL,
        "training.tasks.run_cancel_task": queues.CONTROL,
        "console.tasks.sessions_clear_expired_task": queues.CONTROL,
        "tasks_library.tasks.validate_task_versions": queues.VALIDATION,
        "tasks_library.tasks.build_environment_task": queues.VALIDATION,  # pip, npm, debootstrap
        "training.tasks.run_llm_monitor_task": queues.DEFAULT,
    }
    for name, queue in expected.items():
        assert queue_of(name, 1, 2) == queue, name
    ours = {
        name
        for name in app.tasks
        if name.split(".")[0] in ("console", "training", "tasks_library", "sandboxes")
    }
    assert ours == {*expected, "training.tasks.run_launch"}, (
        "a task without a route: add it to core/queues.py"
    )
    assert queue_of("some.other.task") == queues.DEFAULT
    assert (
        app.amqp.router.route({"queue": queues.VALIDATION}, "training.tasks.runs_reconcile_task")[
            "queue"
        ].name
        == queues.VALIDATION
    )  # an explicit queue wins


def test_the_beat_schedules_registered_tasks_on_the_control_queue():
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in app.tasks
        assert queue_of(entry["task"]) == queues.CONTROL
        assert (
            entry["options"]["expires"] > 0
        )  # a pass no worker took in time is dropped, not piled up


def test_safe_to_repeat_tasks_are_acknowledged_late_and_the_periodic_pass_is_not():
    for name in (
        "training.tasks.run_launch",
        "training.tasks.run_cancel_task",
        "training.tasks.run_llm_monitor_task",
        "tasks_library.tasks.validate_task_versions",
    ):
        assert app.tasks[name].acks_late and app.tasks[name].reject_on_worker_lost, name
    assert not app.tasks[
        "training.tasks.runs_reconcile_task"
    ].acks_late  # the next pass does its work


def _messages(queue: str) -> list[str]:
    return [json.loads(raw)["headers"]["id"] for raw in Q.connection().lrange(queue, 0, -1)]


def _drop(queue: str, task_id: str) -> None:
    redis = Q.connection()
    for raw in redis.lrange(queue, 0, -1):
        if json.loads(raw)["headers"]["id"] == task_id:
            redis.lrem(queue, 1, raw)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_validation_worker_leaves_control_work_alone_and_the_stack_starts_one_for_it(monkeypatch):
    port = free_port()
    hostname = f"test-validation-{os.getpid()}@localhost"
    env = child_env(CRUCIBLE_METRICS_PORT=str(port), CRUCIBLE_LOG_FORMAT="json")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "worker",
            "-Q",
            queues.VALIDATION,
            "--concurrency",
            "2",
            "--hostname",
            hostname,
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    control = runs_reconcile_task.apply_async()
    stack = Stack()
    try:
        assert control.id in _messages(queues.CONTROL)
        for other in (queues.VALIDATION, queues.TRAINER, queues.DEFAULT):
            assert control.id not in _messages(other)  # one message, one queue
        wait_for(
            lambda: celery_queues_consumed() == {queues.VALIDATION}, what="the validation worker"
        )
        validation = validate_task_versions.apply_async(args=([], {}))

        def validated() -> bool:
            return (
                value(
                    scrape(port),
                    "crucible_celery_tasks_total",
                    task=validate_task_versions.name,
                    state="success",
                )
                == 1
            )

        wait_for(validated, what="the validation task's success in the worker's metrics")
        assert validation.id not in _messages(queues.VALIDATION)
        text = scrape(port)
        assert (
            value(
                text,
                "crucible_celery_tasks_total",
                task=validate_task_versions.name,
                state="started",
            )
            == 1
        )
        assert (
            value(
                text,
                "crucible_celery_task_duration_seconds_count",
                task=validate_task_versions.name,
            )
            == 1
        )
        assert (
            value(
                text, "crucible_celery_tasks_total", task=runs_reconcile_task.name, state="started"
            )
            is None
        )
        assert control.id in _messages(queues.CONTROL)  # still waiting: nobody consumes control

        # The embedded stack sees workers running but control, trainer and celery unconsumed:
        # it starts one more worker for those (against the test database), which takes the message.
        monkeypatch.setenv("DATABASE_URL", env["DATABASE_URL"])
        stack.worker()
        assert celery_queues_consumed() == set(queues.ALL)
        wait_for(
            lambda: control.id not in _messages(queues.CONTROL), what="the control message consumed"
        )
    finally:
        stack.stop()
        _drop(queues.CONTROL, control.id)
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    assert hostname in out, out[-2000:]
    # the worker logs through settings.LOGGING: JSON lines, Celery's own records included
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(
        r["logger"].startswith("celery") and validation.id in r["message"] for r in records
    ), out[-2000:]


@pytest.mark.django_db(transaction=True)
def test_a_second_delivery_of_a_launch_starts_nothing(spawn):  # the fixture
    run = one_task_run("local")
    # The first delivery claimed the run and supervises its trainer (a stand-in that sleeps).
    trainer = stand_in_trainer(spawn, run.pk)
    as_launched(run, trainer.pid)
    transitions = RunTransition.objects.filter(run=run).count()
    children = _children()

    run_launch.apply(args=(run.pk,)).get()  # the redelivered message, run as a worker runs it

    run.refresh_from_db()
    assert (run.status, run.backend_ref) == (TrainingRun.RUNNING, f"pid:{trainer.pid}")
    assert RunTransition.objects.filter(run=run).count() == transitions
    assert _children() == children  # no second trainer process
    assert trainer.poll() is None  # and the first one left alone


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_at_once_claim_a_launch_once():
    run = one_task_run("local")
    start = threading.Barrier(2)
    claims: list = []

    def deliver() -> None:
        try:
            start.wait()
            claims.append(services.run_launch_claim(run_id=run.pk, reason="test delivery"))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(claim is None for claim in claims) == [False, True]
    run.refresh_from_db()
    assert (run.status, run.backend_ref) == (TrainingRun.LAUNCHING, services.LAUNCH_CLAIM)
    assert RunTransition.objects.filter(run=run, to_status=TrainingRun.LAUNCHING).count() == 1


def _children() -> set[int]:
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                found.update(int(pid) for pid in handle.read().split())
        except OSError:
            pass
    return found


@pytest.mark.django_db
def test_the_beat_clears_expired_sessions_and_keeps_live_ones():
    live, expired = SessionStore(), SessionStore()
    for store in (live, expired):
        store["user"] = "someone"
        store.create()
    Session.objects.filter(session_key=expired.session_key).update(
        expire_date=timezone.now() - timedelta(days=1)
    )

    assert console.tasks.sessions_clear_expired_task.apply().get() == 1
    assert set(Session.objects.values_list("session_key", flat=True)) == {live.session_key}
    assert console.tasks.sessions_clear_expired_task.apply().get() == 0
