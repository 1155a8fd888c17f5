"""Celery tasks of training: thin, they take ids and call one service.

Queues (core/queues.py): ``run_launch`` on ``trainer`` for the local backend (it
supervises the trainer process for the whole run) and on ``control`` otherwise; reconcile and
cancel on ``control``; the LLM monitor on the default queue. Tasks that are safe to run twice
are acknowledged after they ran and requeued when their worker is lost (``acks_late``,
``reject_on_worker_lost``); the reconcile pass is not (the next pass does its work).
"""

from celery import shared_task

from core.logcontext import log_context
from training.backends import BACKENDS, run_cancel
from training.models import TrainingRun
from training.reconcile import runs_reconcile
from training.services import InvalidTransition, run_monitors_step


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_launch(run_id: int) -> None:
    """Hand run ``run_id`` to its launch backend.

    Safe to deliver twice: the backend first claims the run (``services.run_launch_claim``:
    ``pending`` -> ``launching`` under a row lock), so a second delivery, or a redelivery while
    the first still supervises its trainer, finds it claimed and starts nothing.
    """
    with log_context(run_id=run_id):
        backend = TrainingRun.objects.values_list("backend", flat=True).get(pk=run_id)
        BACKENDS[backend].launch(run_id)


@shared_task(ignore_result=True)
def runs_reconcile_task() -> dict:
    """One pass of the reconcile loop (Celery beat, every CRUCIBLE_RECONCILE_INTERVAL_S seconds)."""
    return {str(run_id): done for run_id, done in runs_reconcile().items()}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_cancel_task(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel run ``run_id`` and stop its trainer; False if it was cancelled already or had ended.

    Safe to deliver twice: cancelling a cancelled run only stops what is left of it again.
    """
    with log_context(run_id=run_id):
        try:
            return run_cancel(run_id=run_id, reason=reason)
        except InvalidTransition:  # it ended succeeded or failed first: nothing to cancel
            return False


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_llm_monitor_task(run_id: int, step: int) -> dict:
    """Score a step's trajectories with the run's LLM monitor (slow: off the trainer's path).

    Safe to deliver twice: a (trajectory, monitor) pair already scored is skipped.
    """
    with log_context(run_id=run_id, step=step):
        return run_monitors_step(run_id=run_id, step=step, include_llm=True)
