"""Celery tasks of the task library: thin, they take ids and call one service (queue
``validation``)."""

import contextlib

from celery import shared_task
from kombu.exceptions import OperationalError

from core.lease import Lease
from tasks_library.environments import (
    EnvironmentUnavailable,
    environment_build,
    environment_build_publish,
)
from tasks_library.models import EnvironmentVersion, TaskVersion, ValidationJob
from tasks_library.services import (
    validation_job_create,
    validation_job_fail,
    validation_job_finish,
    validation_job_progress,
)
from tasks_library.validation.pipeline import Options, task_versions_validate

JOB_LEASE_TTL_S = 30.0
"""Seconds a validation job's lease outlives a worker that died running it."""
JOB_DEFER_S = 30
"""Seconds a second delivery of a job that runs elsewhere waits before looking again."""


def _job_lease(job: ValidationJob) -> Lease:
    # created_at too: job ids repeat across databases that share one Redis (tests, two
    # deployments on one Redis), a job's creation time with it does not.
    return Lease(
        f"crucible:lease:validation-job:{job.pk}:{job.created_at.timestamp():.6f}",
        ttl_s=JOB_LEASE_TTL_S,
    )


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def validate_task_versions(
    self, version_ids: list[int], options: dict | None = None, job_id: int | None = None
) -> dict:
    """Run the validation pipeline on these versions (in the sandbox pool); return verdict counts.
    With ``job_id`` (a :class:`~tasks_library.models.ValidationJob`), the job records each stage
    as it starts and the verdicts when done, or why it failed.

    Safe to deliver twice, and a job runs at most once at a time and to its end once: a job that
    is done (or failed) is not run again (its recorded verdicts are counted); one whose lease is
    held by a live worker (a redelivery after the broker's visibility timeout) is deferred by
    :data:`JOB_DEFER_S` seconds and looked at again, so that a worker killed mid-job has its job
    taken over within seconds of the message's redelivery, and each verdict is recorded once.
    """
    job = ValidationJob.objects.filter(pk=job_id).first() if job_id is not None else None
    if job is not None and job.status in (ValidationJob.DONE, ValidationJob.FAILED):
        return _counts(result["verdict"] for result in job.results)
    with _job_lease(job) if job is not None else contextlib.nullcontext(True) as held:
        if not held:
            raise self.retry(countdown=JOB_DEFER_S, max_retries=None)
        return _validate(version_ids, options, job_id)


def _counts(verdicts) -> dict:
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def _validate(version_ids: list[int], options: dict | None, job_id: int | None) -> dict:
    versions = list(
        TaskVersion.objects.filter(pk__in=version_ids).select_related("task", "test_suite")
    )

    def progress(stage: str, done: int, total: int) -> None:
        validation_job_progress(job_id=job_id, stage=stage, done=done, total=total)

    try:
        # Checked here too: a message queued before the bounds existed (or by hand) must not
        # plan 10**20 executions; it fails its job with the reason instead.
        checked = Options(**(options or {}))
        checked.check()
        task_versions_validate(
            versions=versions,
            options=checked,
            on_stage=progress if job_id is not None else None,
        )
    except Exception as exc:
        if job_id is not None:
            validation_job_fail(job_id=job_id, error=f"{type(exc).__name__}: {exc}")
        raise
    if job_id is not None:
        validation_job_finish(job_id=job_id, versions=versions)
    return _counts(version.verdict for version in versions)


def validation_job_start(*, version_ids: list[int], options: dict, author: str) -> ValidationJob:
    """Create a validation job and queue its Celery task; a queue that cannot be reached fails
    the job at once, saying so (the page or API shows it).

    Raises:
        InputError: (``ids``) no version or an unknown one.
    """
    job = validation_job_create(version_ids=version_ids, options=options, author=author)
    try:
        sent = validate_task_versions.delay(job.version_ids, job.options, job.pk)
    except OperationalError as exc:
        validation_job_fail(job_id=job.pk, error=f"the task queue is unreachable: {exc}")
    else:
        ValidationJob.objects.filter(pk=job.pk).update(celery_id=sent.id or "")
    job.refresh_from_db()
    return job


@shared_task(acks_late=True, reject_on_worker_lost=True)
def build_environment_task(environment_id: int) -> dict:
    """Build an environment version into the store (a cache hit when built), writing each step
    to its ``build_log`` as it starts (the environment page shows it live), then the outcome.

    Safe to deliver twice: a second build of the same layers is a cache hit.
    """
    environment = EnvironmentVersion.objects.get(pk=environment_id)
    lines: list[str] = []

    def progress(line: str) -> None:
        lines.append(line)
        EnvironmentVersion.objects.filter(pk=environment_id).update(build_log="\n".join(lines))
        environment_build_publish(environment_id)

    try:
        built = environment_build(environment=environment, progress=progress)
    except EnvironmentUnavailable as exc:
        return {"status": "failed", "error": str(exc), "kind": exc.kind, "package": exc.package}
    return {"status": "built", "key": built.key, "cache_hit": built.cache_hit}


def environment_build_start(*, environment: EnvironmentVersion) -> EnvironmentVersion:
    """Mark ``environment`` building and queue its build (Celery, queue ``validation``); a queue
    that cannot be reached marks the build failed at once, saying so."""
    EnvironmentVersion.objects.filter(pk=environment.pk).update(
        build_status=EnvironmentVersion.BUILD_BUILDING, build_error="", build_log="queued"
    )
    try:
        build_environment_task.delay(environment.pk)
    except OperationalError as exc:
        EnvironmentVersion.objects.filter(pk=environment.pk).update(
            build_status=EnvironmentVersion.BUILD_FAILED,
            build_error=f"the task queue is unreachable: {exc}",
        )
    environment_build_publish(environment.pk)
    environment.refresh_from_db()
    return environment
