"""Follow a run from a command line until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable

from training.models import StepMetric, TrainingRun

PHASES = {"sft": ("SFT warm start", "epoch")}


def progress_text(progress: dict) -> str:
    """A run's ``summary["progress"]`` as the run page shows it: ``SFT warm start: epoch 4 of 18
    (loss 1.234)`` (``frontend/console/run_live.js`` writes the same for live events)."""
    phase, unit = PHASES.get(progress.get("phase"), (str(progress.get("phase")), "step"))
    detail = f" ({progress['detail']})" if progress.get("detail") else ""
    return f"{phase}: {unit} {progress.get('done')} of {progress.get('total')}{detail}"


def warm_start_progress(summary: dict) -> dict | None:
    """The warm start's last progress of a run past it (``summary["warm_start"]``, kept by
    ``training.services.progress_retired``), in the form of ``summary["progress"]``."""
    done = summary.get("warm_start")
    if not done:
        return None
    return {
        "phase": "sft",
        "done": done.get("epochs_done"),
        "total": done.get("epochs"),
        "detail": done.get("detail", ""),
        "at": done.get("at"),
    }


def progress_line(run: TrainingRun) -> str:
    """One line on ``run``'s status and reason: ``run 3 launching: claimed``."""
    return f"run {run.pk} {run.status}" + (f": {run.status_reason}" if run.status_reason else "")


def phase_line(run_id: int, progress: dict) -> str:
    """One line on how far a run's long phase is (``summary["progress"]``, recorded by
    :func:`training.services.run_progress_record`):
    ``run 3 running: SFT warm start, epoch 4 of 18 (loss 1.234)``."""
    return f"run {run_id} running: {progress_text(progress).replace(': ', ', ', 1)}"


def run_wait(
    run_id: int,
    *,
    on_step: Callable[[StepMetric], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> TrainingRun:
    """Poll the database until run ``run_id`` is terminal; call ``on_step`` for each new step and
    ``on_progress`` with one line (:func:`progress_line`, :func:`phase_line`) for each change of
    the run's status or of its phase's progress, first with the state it is found in.

    The warm start's last progress stays in the run's summary (as ``warm_start`` once the run is
    past it), so it is reported even when the whole phase (or the whole run) passed between two
    polls.

    Raises:
        TimeoutError: ``timeout_s`` passed first.
    """
    seen = 0
    said_status = said_progress = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        run = TrainingRun.objects.get(pk=run_id)
        status = (run.status, run.status_reason)
        progress = (run.summary or {}).get("progress") or warm_start_progress(run.summary or {})
        if on_progress and status != said_status and not run.is_terminal:
            said_status = status
            on_progress(progress_line(run))
        if on_progress and progress and progress != said_progress:
            said_progress = progress
            on_progress(phase_line(run_id, progress))
        for step in StepMetric.objects.filter(run_id=run_id, step__gt=seen).order_by("step"):
            seen = step.step
            if on_step:
                on_step(step)
        if run.is_terminal:
            if on_progress and status != said_status:
                on_progress(progress_line(run))
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still {run.status} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def run_summary(run: TrainingRun) -> dict:
    """The stable JSON summary of a run:
    ``{"run_id", "status", "steps": [{"step", "reward_mean"}]}``."""
    return {
        "run_id": run.pk,
        "status": run.status,
        "reason": run.status_reason,
        "steps": [
            {"step": s.step, "reward_mean": s.reward_mean} for s in run.steps.order_by("step")
        ],
        "summary": run.summary,
    }
