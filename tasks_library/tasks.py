"""Celery tasks of the task library: thin, they take ids and call one service (queue
``validation``)."""

from celery import shared_task
from kombu.exceptions import OperationalError

from tasks_library.models import TaskVersion, ValidationJob
from tasks_library.services import (
    validation_job_create,
    validation_job_fail,
    validation_job_finish,
    validation_job_progress,
)
from tasks_library.validation.pipeline import Options, task_versions_validate


@shared_task(acks_late=True, reject_on_worker_lost=True)
def validate_task_versions(
    version_ids: list[int], options: dict | None = None, job_id: int | None = None
) -> dict:
    """Run the validation pipeline on these versions (in the sandbox pool); return verdict counts.
    With ``job_id`` (a :class:`~tasks_library.models.ValidationJob`), the job records each stage
    as it starts and the verdicts when done, or why it failed.

    Safe to deliver twice: each version's verdict and report are overwritten by the newer run.
    """
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
    counts: dict[str, int] = {}
    for version in versions:
        counts[version.verdict] = counts.get(version.verdict, 0) + 1
    return counts


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
