"""Reads of the task library."""

from __future__ import annotations

from django.db.models import QuerySet

from tasks_library.models import TaskSet, TaskVersion


class TaskSetNotFound(LookupError):
    """No task set has the given name."""


def task_set_get(*, name: str) -> TaskSet:
    """The task set called ``name``.

    Raises:
        TaskSetNotFound: with a message listing the task sets that exist.
    """
    try:
        return TaskSet.objects.get(name=name)
    except TaskSet.DoesNotExist:
        known = ", ".join(TaskSet.objects.order_by("name").values_list("name", flat=True)) or "none yet"
        raise TaskSetNotFound(
            f"task set {name!r} not found (known: {known}); create it with `python manage.py import_tasks humaneval`"
        ) from None


def task_set_versions(*, task_set: TaskSet) -> QuerySet[TaskVersion]:
    """The pinned versions of ``task_set`` in their set order, with suite and task loaded."""
    return (
        TaskVersion.objects.filter(tasksetmember__task_set=task_set)
        .select_related("task", "test_suite", "environment")
        .order_by("tasksetmember__position")
    )


def runtimes_of(versions) -> list[str]:
    """The sandbox runtimes (``python``, ``node``) that grading these versions needs."""
    from sandboxes.suites import harness

    return sorted({harness(v.test_suite.harness).runtime for v in versions})
