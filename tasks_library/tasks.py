"""Celery tasks of the task library: thin, they take ids and call one service (queue
``validation``)."""

from celery import shared_task

from tasks_library.models import TaskVersion
from tasks_library.validation.pipeline import Options, task_versions_validate


@shared_task(acks_late=True, reject_on_worker_lost=True)
def validate_task_versions(version_ids: list[int], options: dict | None = None) -> dict:
    """Run the validation pipeline on these versions (in the sandbox pool); return verdict counts.

    Safe to deliver twice: each version's verdict and report are overwritten by the newer run.
    """
    versions = list(
        TaskVersion.objects.filter(pk__in=version_ids).select_related("task", "test_suite")
    )
    task_versions_validate(versions=versions, options=Options(**(options or {})))
    counts: dict[str, int] = {}
    for version in versions:
        counts[version.verdict] = counts.get(version.verdict, 0) + 1
    return counts
