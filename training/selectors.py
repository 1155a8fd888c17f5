"""Reads about training runs."""

from __future__ import annotations

from django.db.models import QuerySet

from training.models import StepMetric, TrainingRun


def run_exists(*, run_id: int) -> bool:
    return TrainingRun.objects.filter(pk=run_id).exists()


def run_list() -> QuerySet[TrainingRun]:
    """Runs, newest first, with their task set loaded."""
    return TrainingRun.objects.select_related("task_set").order_by("-id")


def run_steps(*, run_id: int, after: int = 0) -> QuerySet[StepMetric]:
    """A run's steps with ``step > after``, in order."""
    return StepMetric.objects.filter(run_id=run_id, step__gt=after).order_by("step")


def step_event(step: StepMetric) -> dict:
    """The wire form of a step: binned histogram and scalars, never raw rewards."""
    return {
        "kind": "step",
        "seq": step.step,
        "step": step.step,
        "reward_mean": step.reward_mean,
        "histogram": step.reward_histogram,
        "bins": step.reward_bins,
        "metrics": step.metrics,
    }


def evaluation_event(evaluation) -> dict:
    """The wire form of a held-out evaluation: pass@k and mean reward at a step."""
    return {"kind": "evaluation", "step": evaluation.step, "pass_at_k": evaluation.pass_at_k,
            "reward_mean": evaluation.reward_mean, "tasks": evaluation.tasks}


def run_backfill(*, run_id: int, after: int) -> list[dict]:
    """The events a client that has seen up to ``after`` missed: the run's status, then steps."""
    run = TrainingRun.objects.get(pk=run_id)
    events = [{"kind": "status", "status": run.status, "reason": run.status_reason}]
    events += [step_event(step) for step in run_steps(run_id=run_id, after=after)]
    events += [evaluation_event(e) for e in run.evaluations.all()]  # few: every eval_every steps
    return events
