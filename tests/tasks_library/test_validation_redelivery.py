"""A validation job's message delivered again (its worker died, or it ran past the broker's
visibility timeout) runs the job at most once at a time and to its end once: a second delivery
while a live worker holds the job's lease is deferred without touching the job, one after the job
is done records nothing again, and one whose holder died (its lease expired) takes the job over.
Real Redis, real sandboxes."""

import time

import pytest
from celery.exceptions import Retry

from core.lease import Lease
from tasks_library.models import ValidationJob
from tasks_library.tasks import _job_lease, validate_task_versions

pytestmark = pytest.mark.django_db
LIGHT = {"reference_runs": 1, "mutants": 2}


def test_a_second_delivery_while_the_job_runs_elsewhere_is_deferred(library):
    job = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
    with _job_lease(job) as held:  # the first delivery, alive on another worker
        assert held
        with pytest.raises(Retry):
            validate_task_versions.run([library[0].pk], LIGHT, job.pk)
    job.refresh_from_db()
    assert job.status == "queued" and job.started_at is None and job.results == []


def test_a_delivery_after_the_job_is_done_records_nothing_again(library):
    job = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
    assert validate_task_versions.run([library[0].pk], LIGHT, job.pk) == {"valid": 1}
    job.refresh_from_db()
    finished, results = job.finished_at, job.results
    assert validate_task_versions.run([library[0].pk], LIGHT, job.pk) == {"valid": 1}
    job.refresh_from_db()
    assert job.finished_at == finished and job.results == results


def test_a_job_whose_worker_died_is_taken_over_once_its_lease_expires(library):
    job = ValidationJob.objects.create(version_ids=[library[0].pk], options=LIGHT)
    dead = _job_lease(job)
    dead.client.set(dead.key, "a worker that was killed", px=300)  # taken, never renewed
    with pytest.raises(Retry):
        validate_task_versions.run([library[0].pk], LIGHT, job.pk)
    time.sleep(0.4)
    assert validate_task_versions.run([library[0].pk], LIGHT, job.pk) == {"valid": 1}
    job.refresh_from_db()
    assert job.status == "done" and not dead.client.exists(dead.key)  # released at the end


def test_a_lease_is_renewed_while_held_and_released_only_by_its_holder():
    key = f"crucible:lease:test:{time.time_ns()}"
    with Lease(key, ttl_s=0.6) as held:
        assert held
        time.sleep(1.0)  # past its time to live: renewed meanwhile
        with Lease(key, ttl_s=0.6) as second:
            assert not second  # held: the second does not get it, and does not release it
        assert Lease(key).client.exists(key)
    assert not Lease(key).client.exists(key)
