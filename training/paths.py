"""Where a run's files live on disk: kept apart from the trainer so that the processes that only
need the path (Celery's control workers, beat, the web) do not import torch and transformers
(about 8 s and 400 MB per process)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from training.models import TrainingRun


def run_dir(run_id: int) -> Path:
    """Where a run's checkpoints and logs live (shared by every rank): ``runs/<id>-<created>``.

    The creation time is part of the name so that a run never resumes from another run's
    checkpoints that happened to get the same id (a database reset under an old var dir).

    Raises:
        TrainingRun.DoesNotExist: no run has id ``run_id``.
    """
    created = TrainingRun.objects.values_list("created_at", flat=True).get(pk=run_id)
    return Path(settings.VAR_DIR) / "runs" / f"{run_id}-{created:%Y%m%dT%H%M%S%f}"
