"""Follow a run from a command line until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable

from training.models import StepMetric, TrainingRun


def run_wait(
    run_id: int,
    *,
    on_step: Callable[[StepMetric], None] | None = None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> TrainingRun:
    """Poll the database until run ``run_id`` is terminal; call ``on_step`` for each new step.

    Raises:
        TimeoutError: ``timeout_s`` passed first.
    """
    seen = 0
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        run = TrainingRun.objects.get(pk=run_id)
        for step in StepMetric.objects.filter(run_id=run_id, step__gt=seen).order_by("step"):
            seen = step.step
            if on_step:
                on_step(step)
        if run.is_terminal:
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
