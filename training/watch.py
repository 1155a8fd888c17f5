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


def progress_line(run: TrainingRun) -> str:
    """One line on what ``run`` is doing: its status and reason, or, while it runs a long phase
    (``summary["progress"]``, :func:`training.services.run_progress_record`), how far it is:
    ``run 3 running: SFT warm start, epoch 4 of 18 (loss 1.234)``."""
    progress = (run.summary or {}).get("progress") or {}
    if run.status == TrainingRun.RUNNING and progress:
        return f"run {run.pk} running: {progress_text(progress).replace(': ', ', ', 1)}"
    return f"run {run.pk} {run.status}" + (f": {run.status_reason}" if run.status_reason else "")


def run_wait(
    run_id: int,
    *,
    on_step: Callable[[StepMetric], None] | None = None,
    on_progress: Callable[[TrainingRun], None] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> TrainingRun:
    """Poll the database until run ``run_id`` is terminal; call ``on_step`` for each new step and
    ``on_progress`` for the run each time its status or its progress changes (first with the
    state it is found in; :func:`progress_line` says it in words).

    Raises:
        TimeoutError: ``timeout_s`` passed first.
    """
    seen = 0
    said = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        run = TrainingRun.objects.get(pk=run_id)
        state = (run.status, run.status_reason, (run.summary or {}).get("progress"))
        if on_progress and state != said and not run.is_terminal:
            said = state
            on_progress(run)
        for step in StepMetric.objects.filter(run_id=run_id, step__gt=seen).order_by("step"):
            seen = step.step
            if on_step:
                on_step(step)
        if run.is_terminal:
            if on_progress and state != said:
                on_progress(run)
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
