"""The Celery queue of a run's launch, which depends on the run's backend (a Celery router).

``settings.CELERY_TASK_ROUTES`` asks this router first and the core's static routes
(:func:`core.queues.route_task`) next; an explicit ``queue=`` given to ``apply_async``
wins over both (Celery's rule). Kept out of the core because it reads the run's row.
"""

from __future__ import annotations

from core.queues import CONTROL, TRAINER
from training.models import TrainingRun

RUN_LAUNCH = "training.tasks.run_launch"


def launch_queue(run_id: int) -> str:
    """The queue of run ``run_id``'s launch: ``trainer`` for the local backend (the task holds a
    worker slot while it supervises the trainer process), else ``control`` (one API call).

    A run that does not exist goes to ``control``, where the task fails at once saying so.
    """
    backend = TrainingRun.objects.filter(pk=run_id).values_list("backend", flat=True).first()
    return TRAINER if backend == "local" else CONTROL


def route_launch(name: str, args, kwargs, options, task=None, **kw) -> dict | None:
    """Celery router: ``{"queue": NAME}`` for ``run_launch``, None for every other task."""
    if name != RUN_LAUNCH:
        return None
    run_id = (kwargs or {}).get("run_id", args[0] if args else None)
    return {"queue": launch_queue(int(run_id)) if run_id is not None else CONTROL}
