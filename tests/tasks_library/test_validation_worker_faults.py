"""Faults of the Celery worker that runs validation jobs, on a Redis and workers of the test's own
(supervised, as ``crucible up`` runs them), against the test database:

* the worker SIGKILLed in the middle of a job: the supervisor restarts it, the broker delivers the
  job again after the visibility timeout (60 s here, 120 s by default), and it runs to its end
  once: one success, every version's verdict recorded, within minutes;
* Redis SIGKILLed and restarted while the worker waits for work: the worker reconnects (it does not
  die) and runs the next job.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from kombu import Connection

from console.management.stack import Stack, log_dir
from tasks_library.models import ValidationJob
from tasks_library.tasks import validate_task_versions
from tests.database import child_env
from tests.faults import PrivateRedis, celery_worker, sandbox_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
HEAVY = {"reference_runs": 3, "mutants": 12}
LIGHT = {"reference_runs": 1, "mutants": 2}


@pytest.fixture
def private():
    server = PrivateRedis(persist=True, tcp=True).start()
    try:
        yield server
    finally:
        server.close()


def send(private: PrivateRedis, job: ValidationJob) -> None:
    with Connection(private.url) as connection:
        validate_task_versions.apply_async(
            (job.version_ids, job.options, job.pk), connection=connection
        )


def wait_job(job: ValidationJob, statuses: set[str], timeout_s: float) -> ValidationJob:
    deadline = time.monotonic() + timeout_s
    while True:
        job.refresh_from_db()
        if job.status in statuses:
            return job
        assert time.monotonic() < deadline, f"job {job.pk} still {job.status} ({job.stage})"
        time.sleep(0.25)


def started(stack: Stack, name: str):
    """The process ``stack`` started last under ``name``."""
    return [proc for (started_name, proc) in stack.started if started_name == name][-1]


def worker_log() -> str:
    return (log_dir() / "fault-celery.log").read_text(errors="replace")


def test_a_job_whose_worker_was_killed_is_redelivered_and_runs_once(library, private):
    (log_dir() / "fault-celery.log").unlink(missing_ok=True)
    ids = [version.pk for version in library]
    job = ValidationJob.objects.create(version_ids=ids, options=HEAVY)
    env = child_env(CRUCIBLE_CELERY_VISIBILITY_TIMEOUT_S="60")
    with Stack(supervise=True) as stack:
        sandbox_worker(stack, private, env)
        celery_worker(stack, private, env, queues="validation")
        sandboxes = started(stack, "fault-sandbox")
        # The job's sandbox runs are answered in well under a second by a warm worker: held
        # (SIGSTOP) while the job is sent, it waits on its first stage until the Celery worker
        # is killed, which is then mid-job for certain, not only when the poll below is lucky.
        os.killpg(sandboxes.pid, signal.SIGSTOP)
        try:
            send(private, job)
            wait_job(job, {"running"}, timeout_s=120)
            killed_at = time.monotonic()
            os.kill(started(stack, "fault-celery").pid, signal.SIGKILL)
        finally:
            os.killpg(sandboxes.pid, signal.SIGCONT)
        job = wait_job(job, {"done", "failed"}, timeout_s=300)
        took_s = time.monotonic() - killed_at
        assert stack.restarts.get("fault-celery") == 1
    assert job.status == "done", job.error
    assert sorted(result["id"] for result in job.results) == sorted(ids)
    assert took_s < 240, f"the killed job came back after {took_s:.0f} s"
    log = worker_log()
    assert log.count("validate_task_versions[") and log.count(" succeeded in ") == 1, log[-3000:]


def test_the_worker_reconnects_after_redis_is_killed_and_restarted(library, private):
    (log_dir() / "fault-celery.log").unlink(missing_ok=True)
    env = child_env()
    with Stack(supervise=True) as stack:
        sandbox_worker(stack, private, env)
        celery_worker(stack, private, env, queues="validation")
        first = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
        send(private, first)
        wait_job(first, {"done"}, timeout_s=120)
        proc = started(stack, "fault-celery")
        private.kill()
        time.sleep(3)
        private.start()
        second = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
        send(private, second)
        wait_job(second, {"done"}, timeout_s=120)
        assert proc.poll() is None and "fault-celery" not in stack.restarts  # the same worker
    log = worker_log()
    assert "Connection to broker lost" in log
    assert "AttributeError" not in log, log[-3000:]
