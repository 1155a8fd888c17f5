"""Celery tasks of training: thin, they take ids and call one service."""

from celery import shared_task

from training.backends import BACKENDS
from training.models import TrainingRun


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_launch(run_id: int) -> None:
    """Hand run ``run_id`` to its launch backend (safe to repeat: see the backend)."""
    backend = TrainingRun.objects.values_list("backend", flat=True).get(pk=run_id)
    BACKENDS[backend](run_id)
