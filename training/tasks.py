"""Celery tasks of training: thin, they take ids and call one service."""

from celery import shared_task

from training.backends import BACKENDS
from training.models import TrainingRun
from training.reconcile import runs_reconcile
from training.services import InvalidTransition, run_cancel, run_monitors_step


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_launch(run_id: int) -> None:
    """Hand run ``run_id`` to its launch backend (safe to repeat: see the backend)."""
    backend = TrainingRun.objects.values_list("backend", flat=True).get(pk=run_id)
    BACKENDS[backend].launch(run_id)


@shared_task(ignore_result=True)
def runs_reconcile_task() -> dict:
    """One pass of the reconcile loop (Celery beat, every CRUCIBLE_RECONCILE_INTERVAL_S seconds)."""
    return {str(run_id): done for run_id, done in runs_reconcile().items()}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_cancel_task(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel run ``run_id`` and stop its trainer; False if it was cancelled already or had ended."""
    try:
        return run_cancel(run_id=run_id, reason=reason)
    except InvalidTransition:  # it ended succeeded or failed first: nothing to cancel
        return False


@shared_task(acks_late=True, ignore_result=True)
def run_llm_monitor_task(run_id: int, step: int) -> dict:
    """Score a step's trajectories with the run's LLM monitor (slow: off the trainer's path)."""
    return run_monitors_step(run_id=run_id, step=step, include_llm=True)
