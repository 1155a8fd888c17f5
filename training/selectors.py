"""Reads about training runs."""

from __future__ import annotations

import difflib
import json

from django.db import connection
from django.db.models import Count, Func, IntegerField, Max, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Cast, Coalesce

from training.models import MonitorScore, StepMetric, TrainingRun, Trajectory, Turn


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
    events += [alert_event(alert) for alert in run_alerts(run_id=run_id)]  # all: alerts change after they are raised
    return events


# --- trajectories: the list, one trajectory, its turns (the replay pages) ----------

# Sort keys of :func:`trajectory_list`: what a user picks -> the ordering (ties by id).
TRAJECTORY_SORTS = {
    "step": ("step", "group", "index_in_group", "id"),
    "-step": ("-step", "group", "index_in_group", "id"),
    "reward": ("reward", "id"),
    "-reward": ("-reward", "id"),
    "newest": ("-id",),
}


class JsonArrayLength(Func):
    """The length of a JSON array column (SQLite ``json_array_length``, PostgreSQL ``jsonb_array_length``)."""

    function = "JSON_ARRAY_LENGTH"
    output_field = IntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="JSONB_ARRAY_LENGTH", **extra_context)


def _has_flag(queryset: QuerySet[Trajectory], flag: str) -> QuerySet[Trajectory]:
    """Trajectories whose ``flags`` list holds ``flag``: JSON containment where the
    database has it (PostgreSQL), else a match on the list's JSON text (SQLite)."""
    if connection.features.supports_json_field_contains:
        return queryset.filter(flags__contains=[flag])
    return queryset.annotate(_flags_text=Cast("flags", TextField())).filter(_flags_text__contains=json.dumps(flag))


def trajectory_list(*, run_id: int | None = None, step_min: int | None = None, step_max: int | None = None,
                    task: str = "", reward_min: float | None = None, reward_max: float | None = None,
                    flag: str = "", status: str = "", sort: str = "step") -> QuerySet[Trajectory]:
    """Trajectories matching the filters, with their task loaded and ``turn_count`` and
    ``monitor_max`` (the highest monitor score, or None) annotated; bulky columns deferred.

    Args:
        task: a substring of the task id (``HumanEval/1``), case-insensitive.
        flag: ``""`` for any trajectory, ``"any"`` for flagged ones, ``"none"`` for
            unflagged ones, else the name of a flag the trajectory must carry.
        sort: a key of :data:`TRAJECTORY_SORTS`.
    """
    queryset = Trajectory.objects.select_related("task_version__task").defer(
        "prompt_token_ids", "final_code", "flag_evidence", "task_version__prompt", "task_version__reference_solution",
        "task_version__files", "task_version__report", "task_version__verdict_reasons",
    )
    if run_id is not None:
        queryset = queryset.filter(run_id=run_id)
    if step_min is not None:
        queryset = queryset.filter(step__gte=step_min)
    if step_max is not None:
        queryset = queryset.filter(step__lte=step_max)
    if task:
        queryset = queryset.filter(task_version__task__task_id__icontains=task)
    if reward_min is not None:
        queryset = queryset.filter(reward__gte=reward_min)
    if reward_max is not None:
        queryset = queryset.filter(reward__lte=reward_max)
    if status:
        queryset = queryset.filter(status=status)
    if flag == "any":
        queryset = queryset.exclude(flags=[])
    elif flag == "none":
        queryset = queryset.filter(flags=[])
    elif flag:
        queryset = _has_flag(queryset, flag)
    turns = Turn.objects.filter(trajectory=OuterRef("pk")).order_by().values("trajectory").annotate(n=Count("id"))
    monitors = (MonitorScore.objects.filter(trajectory=OuterRef("pk")).order_by().values("trajectory")
                .annotate(top=Max("score")))
    queryset = queryset.annotate(
        turn_count=Coalesce(Subquery(turns.values("n")), 0),
        monitor_max=Subquery(monitors.values("top")),
    )
    return queryset.order_by(*TRAJECTORY_SORTS.get(sort, TRAJECTORY_SORTS["step"]))


def trajectory_get(*, run_id: int, trajectory_id: int) -> Trajectory:
    """One trajectory of one run, with its task version and task loaded.

    Raises:
        Trajectory.DoesNotExist: no trajectory ``trajectory_id`` in run ``run_id``.
    """
    return (Trajectory.objects.select_related("run__task_set", "task_version__task")
            .defer("task_version__prompt", "task_version__reference_solution", "task_version__files",
                   "task_version__report", "task_version__verdict_reasons")
            .get(pk=trajectory_id, run_id=run_id))


def trajectory_monitor_scores(*, trajectory_id: int) -> QuerySet[MonitorScore]:
    """The monitors' scores of a trajectory, most suspicious first."""
    return MonitorScore.objects.filter(trajectory_id=trajectory_id).order_by("-score", "monitor")


def trajectory_group(*, run_id: int, step: int, group: int) -> QuerySet[Trajectory]:
    """The trajectories of one group (same run, step and group), by index: id, index, reward, status."""
    return (Trajectory.objects.filter(run_id=run_id, step=step, group=group).order_by("index_in_group", "id")
            .only("id", "run_id", "step", "group", "index_in_group", "reward", "status"))


def trajectory_turn_index(*, trajectory_id: int) -> list[tuple[int, str, str]]:
    """``(index, action, sandbox_status)`` of each turn in order: the table of contents of a replay."""
    return list(Turn.objects.filter(trajectory_id=trajectory_id).order_by("index")
                .values_list("index", "action", "sandbox_status"))


def trajectory_turns(*, trajectory_id: int) -> QuerySet[Turn]:
    """A trajectory's turns in order, token arrays left in the database (their lengths
    annotated as ``sampled_tokens`` and ``observation_tokens``)."""
    return (Turn.objects.filter(trajectory_id=trajectory_id).order_by("index")
            .defer("token_ids", "logprobs", "observation_token_ids")
            .annotate(sampled_tokens=JsonArrayLength("token_ids"),
                      observation_tokens=JsonArrayLength("observation_token_ids")))


def turn_code_before(*, trajectory_id: int, offset: int) -> str:
    """The code of the turn just before position ``offset`` of a trajectory ("" at 0)."""
    if offset <= 0:
        return ""
    codes = Turn.objects.filter(trajectory_id=trajectory_id).order_by("index").values_list("code", flat=True)
    return next(iter(codes[offset - 1:offset]), "")


def code_diff(*, old: str, new: str, context: int = 3) -> list[tuple[str, str]]:
    """The unified diff from ``old`` to ``new``, each line with its kind: ``head``,
    ``hunk``, ``add``, ``del`` or ``ctx``; empty when nothing changed."""
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), "previous turn", "this turn",
                                     n=context, lineterm=""):
        if line.startswith(("+++", "---")) and not lines[2:]:
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


# --- drift and onset alerts (training.drift raises them) -------------------------------------

def run_alerts(*, run_id: int) -> QuerySet:
    """A run's drift and onset alerts (``training.models.Alert``), oldest first, with who acknowledged them."""
    from training.models import Alert

    return Alert.objects.filter(run_id=run_id).select_related("acknowledged_by").order_by("id")


def alert_event(alert) -> dict:
    """The wire form of an alert (new, merged into by a repeat, or acknowledged): the client
    keeps one entry per ``id`` and replaces it with each newer event of that id."""
    by = alert.acknowledged_by
    return {
        "kind": "alert",
        "id": alert.pk,
        "run_id": alert.run_id,
        "step": alert.step,
        "last_step": alert.last_step,
        "stream": alert.stream,
        "detector": alert.detector,
        "statistic": alert.statistic,
        "threshold": alert.threshold,
        "window": alert.window,
        "severity": alert.severity,
        "message": alert.message,
        "repeats": alert.repeats,
        "created_at": alert.created_at.isoformat() if alert.created_at else None,
        "acknowledged": alert.acknowledged_at is not None,
        "acknowledged_at": alert.acknowledged_at.isoformat() if alert.acknowledged_at else None,
        "acknowledged_by": by.get_username() if by is not None else None,
        "acknowledgement_note": alert.acknowledgement_note,
    }
