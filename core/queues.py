"""Celery queues by kind of work, and the router that puts each task on its queue.

=============  ==========================================================================
queue          what lands there
=============  ==========================================================================
``control``    the control plane: the reconcile pass (beat), cancelling runs, launching a
               run on the ``kubernetes`` backend (one API call), periodic clean-ups.
               Small and quick; must never wait behind long work.
``validation`` the task-library validation pipeline (``validate_task_versions``): minutes
               of waiting on the sandbox pool per batch; environment builds
               (``build_environment_task``: pip, npm, mmdebstrap), minutes the first time.
``trainer``    launching a run on the ``local`` backend: the task starts the trainer as a
               child process of the worker and supervises it until it ends, holding one
               worker slot for the whole run (hours). A worker's ``--concurrency`` on this
               queue is the number of trainers its host runs at once.
``celery``     the default queue: the LLM monitor's scoring of a step's trajectories
               (seconds per trajectory of HTTP calls, off the trainer's path) and any task
               no route names.
=============  ==========================================================================

Sandbox executions are not Celery tasks: they go through Crucible's own Redis lists
(``crucible:sandbox:<runtime>:pending``, :mod:`sandboxes.queue`) consumed by
``sandbox_worker``.

The ``local`` backend reads its trainers' pids on the host it runs on (training/backends.py),
so a deployment that launches ``local`` runs must consume ``control`` and ``trainer`` in one
worker on that host (``-Q control,trainer``, or all queues, as the embedded worker does);
split per-queue Deployments go with the ``kubernetes`` backend, whose launches are on
``control``.

This module is read by the settings: nothing here imports Django models at import time.
"""

from __future__ import annotations

CONTROL = "control"
VALIDATION = "validation"
TRAINER = "trainer"
DEFAULT = "celery"
ALL = (CONTROL, VALIDATION, TRAINER, DEFAULT)
"""Every queue, in the order a worker consuming all of them lists them (``-Q``)."""

ROUTES: dict[str, str] = {
    "training.tasks.runs_reconcile_task": CONTROL,
    "training.tasks.run_cancel_task": CONTROL,
    "console.tasks.sessions_clear_expired_task": CONTROL,
    "tasks_library.tasks.validate_task_versions": VALIDATION,
    "tasks_library.tasks.build_environment_task": VALIDATION,
    "training.tasks.run_llm_monitor_task": DEFAULT,
}
"""Task name -> queue, for every task whose queue does not depend on its arguments."""


def route_task(name: str, args, kwargs, options, task=None, **kw) -> dict | None:
    """Celery router (``task_routes``): ``{"queue": NAME}`` for the tasks whose queue is fixed,
    None for others. A run's launch is routed by its backend (:mod:`training.routing`, asked
    first); an explicit ``queue=`` given to ``apply_async`` wins over both (Celery's rule).
    """
    queue = ROUTES.get(name)
    return {"queue": queue} if queue else None
