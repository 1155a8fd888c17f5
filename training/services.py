"""Writes about training runs: creation, status transitions, steps, trajectories."""

from __future__ import annotations

import hashlib
import json
import logging
import re

from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from core.dbtext import storable
from core.errors import InputError
from core.events import RUNS_GROUP, broadcast_event, broadcast_run_event
from core.logcontext import log_context
from core.permissions import may_operate_run
from tasks_library.models import TaskSet, TaskVersion
from tasks_library.selectors import task_set_versions, trainable
from training import run_warnings
from training.config import RunConfig
from training.flags import NOT_SCORED
from training.launch_checks import launch_check
from training.models import (
    REWARD_BINS,
    Alert,
    EpisodeOpening,
    HeldOutEvaluation,
    MonitorScore,
    RunTransition,
    RunWarning,
    StepMetric,
    TrainingRun,
    Trajectory,
)
from training.monitors import LlmMonitor, LlmMonitorConfig, RuleMonitor, failure, trajectory_view
from training.selectors import (
    alert_event,
    evaluation_event,
    run_row_event,
    step_event,
    step_event_components,
    warning_event,
)
from training.turn_writer import turns_write

log = logging.getLogger(__name__)

# Allowed moves of the run state machine.
TRANSITIONS = {
    TrainingRun.PENDING: {TrainingRun.LAUNCHING, TrainingRun.CANCELLED, TrainingRun.FAILED},
    TrainingRun.LAUNCHING: {
        TrainingRun.RUNNING,
        TrainingRun.FAILED,
        TrainingRun.CANCELLED,
        TrainingRun.INTERRUPTED,
    },
    TrainingRun.RUNNING: {
        TrainingRun.SUCCEEDED,
        TrainingRun.FAILED,
        TrainingRun.CANCELLED,
        TrainingRun.INTERRUPTED,
    },
    TrainingRun.INTERRUPTED: {TrainingRun.LAUNCHING, TrainingRun.FAILED, TrainingRun.CANCELLED},
}


class InvalidTransition(ValueError):
    """A status change the run state machine does not allow."""


MAX_TAGS = 20
TAG = re.compile(r"^[\w.:/+-]{1,40}$")


def run_labels_check(*, name: str = "", description: str = "", tags=None) -> dict:
    """A run's name, description and tags as stored: stripped, tags in order without repeats.

    Raises:
        InputError: (``name``) over 200 characters; (``description``) over 5,000; (``tags``) not
            a list of words, a tag over 40 characters or with spaces or commas, more than 20.
    """
    name, description = (name or "").strip(), (description or "").strip()
    if len(name) > 200:
        raise InputError("name: at most 200 characters", field="name")
    if len(description) > 5000:
        raise InputError("description: at most 5,000 characters", field="description")
    if tags is None:
        tags = []
    if isinstance(tags, str):
        tags = tags.replace(",", " ").split()
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError('tags: a list of words, e.g. ["sweep", "lr-1e-4"]', field="tags")
    tags = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
    bad = [t for t in tags if not TAG.match(t)]
    if bad:
        raise InputError(
            f"tags: {bad[0]!r} is not a tag (1-40 letters, digits or . _ : / + -, no spaces)",
            field="tags",
        )
    if len(tags) > MAX_TAGS:
        raise InputError(f"tags: at most {MAX_TAGS}", field="tags")
    return {"name": name, "description": description, "tags": tags}


@transaction.atomic
def run_create(
    *,
    task_set: TaskSet,
    config: RunConfig,
    backend: str = "local",
    name: str = "",
    description: str = "",
    tags: list | None = None,
    launched_by: str = "",
) -> TrainingRun:
    """Create a pending run that pins the task set's current versions.

    With ``config.eval_task_set``, the run also names its held-out set; tasks of that set
    are taken out of the training versions, so the run never trains on what it evaluates.
    ``name``, ``description`` and ``tags`` (:func:`run_labels_check`) and ``launched_by`` (who:
    a username, or the command line's author) are what the runs table shows.

    Raises:
        InputError: a bad name, description or tags (naming the field).
        ConfigError: what :func:`training.launch_checks.launch_check` refuses (repository tasks
            outside agent mode, every prompt longer than ``max_prompt_tokens``).
        ValueError: the task set has no valid task version to train on, or the held-out set
            is unknown, has nothing trainable, or holds every training task.
    """
    labels = run_labels_check(name=name, description=description, tags=tags)
    pinned = task_set_versions(task_set=task_set)
    if not pinned.exists():
        raise ValueError(
            f"task set {task_set.name!r} is empty; pin task versions into it (import_tasks "
            "--taskset)"
        )
    versions = list(trainable(pinned))
    if not versions:
        raise ValueError(
            f"task set {task_set.name!r} has no trainable task version (validated and not "
            f"quarantined); run `python manage.py validate_tasks --taskset {task_set.name}`"
        )
    eval_set = None
    if config.eval_task_set:
        eval_set = TaskSet.objects.filter(name=config.eval_task_set).first()
        if eval_set is None:
            raise ValueError(
                f"config key 'eval_task_set': no task set named {config.eval_task_set!r}"
            )
        held_out = {v.task_id for v in trainable(task_set_versions(task_set=eval_set))}
        if not held_out:
            raise ValueError(
                f"config key 'eval_task_set': {eval_set.name!r} has no trainable task version; "
                f"validate it first"
            )
        versions = [v for v in versions if v.task_id not in held_out]
        if not versions:
            raise ValueError(
                f"every task of {task_set.name!r} is in the held-out set {eval_set.name!r}: "
                f"nothing is left to train on"
            )
    launch_check(versions=versions, config=config)  # a run that could train nothing
    run = TrainingRun.objects.create(
        task_set=task_set,
        config=config.to_dict(),
        backend=backend,
        launched_by=(launched_by or "")[:150],
        **labels,
        total_steps=config.steps,
        task_set_version=task_set.versions.order_by("-number").first(),
        eval_task_set=eval_set,
    )
    run.task_versions.set(versions)
    RunTransition.objects.create(
        run=run, from_status="", to_status=TrainingRun.PENDING, reason="created"
    )
    return run  # the runs table hears of it at its launch (run_transition), not before


@transaction.atomic
def run_update(*, run_id: int, user, **changes) -> TrainingRun:
    """Rename, describe or retag a run (``name``, ``description``, ``tags``; others refused).

    Raises:
        PermissionDenied: ``user`` may not operate runs (curators, operators, admins may).
        InputError: an unknown field, or a bad value (:func:`run_labels_check`).
        TrainingRun.DoesNotExist: no such run.
    """
    if not may_operate_run(user):
        raise PermissionDenied("only curators and operators may rename, describe or tag runs")
    unknown = sorted(set(changes) - {"name", "description", "tags"})
    if unknown:
        raise InputError(
            f"{unknown[0]}: not a field of a run you may change (name, description, tags)",
            field=unknown[0],
        )
    run = TrainingRun.objects.select_for_update().get(pk=run_id)
    current = {"name": run.name, "description": run.description, "tags": run.tags}
    labels = run_labels_check(**{**current, **changes})
    for key, value in labels.items():
        setattr(run, key, value)
    run.save(update_fields=list(labels))
    return run


def run_transition(*, run_id: int, to_status: str, reason: str = "") -> TrainingRun:
    """Move a run to ``to_status``, record why, and tell its watchers.

    Raises:
        InvalidTransition: the state machine does not allow the move.
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if to_status not in TRANSITIONS.get(run.status, set()):
            raise InvalidTransition(f"run {run_id} cannot go from {run.status} to {to_status}")
        RunTransition.objects.create(
            run=run, from_status=run.status, to_status=to_status, reason=reason
        )
        run.status, run.status_reason = to_status, reason
        now = timezone.now()
        if to_status == TrainingRun.RUNNING and run.started_at is None:
            run.started_at = now
        fields = ["status", "status_reason", "started_at", "finished_at"]
        if to_status in TrainingRun.TERMINAL:
            run.finished_at = now
            if "progress" in (run.summary or {}):  # a phase of a run that no longer runs
                run.summary = progress_retired(run.summary)
                fields.append("summary")
        run.save(update_fields=fields)
    broadcast_run_event(run_id, {"kind": "status", "status": to_status, "reason": reason})
    runs_table_publish(run_id=run_id)
    return run


def runs_table_publish(*, run_id: int, step_metrics: dict | None = None) -> None:
    """Tell the runs table's watchers a run's row as persisted now
    (:func:`training.selectors.run_row_event`; ``step_metrics``: the step just recorded)."""
    run = TrainingRun.objects.filter(pk=run_id).first()
    if run is not None:
        broadcast_event(RUNS_GROUP, run_row_event(run, step_metrics=step_metrics))


def run_interrupt_if_active(*, run_id: int, reason: str) -> bool:
    """Mark a launching or running run ``interrupted`` (its trainer is gone); True if it was."""
    status = TrainingRun.objects.values_list("status", flat=True).get(pk=run_id)
    if status not in (TrainingRun.LAUNCHING, TrainingRun.RUNNING):
        return False
    try:
        run_transition(run_id=run_id, to_status=TrainingRun.INTERRUPTED, reason=reason)
    except InvalidTransition:  # it moved on meanwhile
        return False
    return True


def reward_histogram(rewards: list[float]) -> list[int]:
    """Counts of ``rewards`` over :data:`REWARD_BINS` (ten bins on [0, 1], last one closed)."""
    counts = [0] * (len(REWARD_BINS) - 1)
    for value in rewards:
        index = min(int(value * 10), len(counts) - 1) if value >= 0 else 0
        counts[index] += 1
    return counts


def step_record(
    *, run_id: int, step: int, rollouts: list, metrics: dict, timeline: dict | None = None
) -> StepMetric:
    """Persist one finished RL step (its trajectories, turns and metrics), then broadcast it.

    Args:
        rollouts: :class:`training.rollout.Rollout` objects of the step; dropped ones
            are stored with their flag and left out of the reward statistics.
        metrics: cleanrl-style scalar metrics (``loss/policy``, ``timing/update_s``...).
        timeline: the trainer's phases and the sandbox pool over the step
            (:meth:`training.phase.PhaseTracker.take_step`), drawn on the run page.
    """
    scored = [r.reward for r in rollouts if not r.dropped]
    reward_mean = sum(scored) / len(scored) if scored else 0.0
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().only("summary").get(pk=run_id)
        if "progress" in (run.summary or {}):  # the warm start's epochs: over once a step lands
            run.summary = progress_retired(run.summary)
            run.save(update_fields=["summary"])
        metric = StepMetric.objects.create(
            run_id=run_id,
            step=step,
            reward_mean=reward_mean,
            reward_histogram=reward_histogram(scored),
            reward_bins=REWARD_BINS,
            metrics={"reward/mean": reward_mean, **metrics},
            timeline=timeline or {},
        )
        openings = _openings_stored(rollouts)
        trajectories = Trajectory.objects.bulk_create(
            Trajectory(
                run_id=run_id,
                step=step,
                group=r.group,
                index_in_group=r.index_in_group,
                task_version_id=r.task.task_version_id,
                status=r.status,
                reward=r.reward,
                reward_components=r.reward_components or {"correctness": r.reward},
                advantage=r.advantage,
                flags=r.flags,
                flag_evidence=storable(r.flag_evidence),  # policy and sandbox text: may hold NUL
                tests_passed=r.tests_passed,
                tests_total=r.tests_total,
                prompt_token_ids=r.prompt_ids,
                final_code=storable(r.final_code),
                fresh_tests=storable(r.task.fresh_tests),
                opening_id=openings.get(id(r)),
                grading=storable(getattr(r, "grading", None) or {}),
            )
            for r in rollouts
        )
        turns_write(
            (
                trajectory.pk,
                i,
                getattr(t, "action", "run_code"),
                t.policy_text,
                t.token_ids,
                t.logprobs,
                t.code,
                t.observation,
                t.observation_ids,
                t.sandbox_status,
                t.sandbox_result,
            )
            for trajectory, r in zip(trajectories, rollouts)
            for i, t in enumerate(r.turns)
        )
        warnings = _step_warnings_write(run_id, step, metric.metrics)
    broadcast_run_event(run_id, _step_event_with_components(metric))
    for warning in warnings:
        broadcast_run_event(run_id, warning_event(warning))
    runs_table_publish(run_id=run_id, step_metrics={"step": step, **metric.metrics})
    return metric


def _step_event_with_components(metric: StepMetric) -> dict:
    """The step's live event with its reward components' histograms, read once here, after the
    commit, for every watcher: the web processes then forward it as it is, instead of each
    querying the database for them (``console.consumers.wire_event``), which during a big
    write is what a watcher waited for. A failed read leaves them to the web processes."""
    event = step_event(metric)
    try:
        event["components"] = step_event_components(
            run_id=metric.run_id, step=metric.step, metrics=metric.metrics
        )
    except DatabaseError:
        log.warning("step %s of run %s: components left to the console", metric.step, metric.run_id)
    return event


def _openings_stored(rollouts: list) -> dict[int, str]:
    """Store the distinct openings of the step's agent rollouts (``rollout.opening``: system,
    user, tools) once each, by content; ``{id(rollout): digest}``."""
    out, seen = {}, {}
    for rollout in rollouts:
        opening = getattr(rollout, "opening", None)
        if opening is None:
            continue
        content = storable(
            {"system": opening.system, "user": opening.user, "tools": list(opening.tools)}
        )
        digest = hashlib.sha256(
            json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        if digest not in seen:
            seen[digest] = EpisodeOpening.objects.get_or_create(digest=digest, defaults=content)
        out[id(rollout)] = digest
    return out


def _step_warnings_write(run_id: int, step: int, metrics: dict) -> list[RunWarning]:
    """Raise or extend the run's step warnings that ``metrics`` call for
    (:func:`training.run_warnings.step_warnings`); the caller's transaction holds the write."""
    touched = []
    for found in run_warnings.step_warnings(step, metrics):
        warning, _created = RunWarning.objects.select_for_update().get_or_create(
            run_id=run_id, kind=found["kind"], defaults={"message": "", "first_step": step}
        )
        steps = dict((warning.details or {}).get("steps", {}))
        steps[str(step)] = found["figures"]
        newest = sorted(steps, key=int)[-run_warnings.STEPS_KEPT :]
        warning.details = {"steps": {k: steps[k] for k in newest}}
        warning.steps += 1
        warning.first_step = min(step, warning.first_step or step)
        warning.last_step = max(step, warning.last_step or step)
        warning.message = run_warnings.step_warning_message(
            warning.kind, warning.details["steps"], warning.steps, warning.last_step
        )
        warning.save()
        touched.append(warning)
    return touched


def run_warning_raise(*, run_id: int, kind: str, message: str, details: dict) -> RunWarning:
    """Record (or replace) a warning the trainer found before the run's first step (the tasks it
    dropped: :func:`training.run_warnings.tasks_dropped_warning`), then tell the run's page and
    the runs table."""
    with transaction.atomic():
        warning, _created = RunWarning.objects.update_or_create(
            run_id=run_id, kind=kind, defaults={"message": message, "details": details}
        )
    broadcast_run_event(run_id, warning_event(warning))
    runs_table_publish(run_id=run_id)
    return warning


@transaction.atomic
def run_rewind(*, run_id: int, to_step: int) -> list[int]:
    """Delete a run's records of steps after ``to_step`` (before a resume from that step's
    checkpoint).

    A step recorded after the newest checkpoint is trained again on resume; its old
    trajectories, turns and metrics go, and their graded attempts are taken back out of
    the task versions' pass-rate counts, so nothing is counted twice.

    Returns:
        The step numbers deleted, ascending.
    """
    later = Trajectory.objects.filter(run_id=run_id, step__gt=to_step)
    counts: dict[int, list[int]] = {}
    for version_id, tests_passed, tests_total, flags in later.values_list(
        "task_version_id", "tests_passed", "tests_total", "flags"
    ):
        if NOT_SCORED.intersection(flags):
            continue  # never counted (see training.trainer._record_attempts)
        passed = int(tests_total > 0 and tests_passed == tests_total)
        tally = counts.setdefault(version_id, [0, 0])
        tally[0] += passed
        tally[1] += 1
    for version_id, (passed, total) in counts.items():
        TaskVersion.objects.filter(pk=version_id).update(
            attempts_passed=Greatest(F("attempts_passed") - passed, 0),
            attempts_total=Greatest(F("attempts_total") - total, 0),
        )
    steps = sorted(
        StepMetric.objects.filter(run_id=run_id, step__gt=to_step).values_list("step", flat=True)
    )
    later.delete()
    StepMetric.objects.filter(run_id=run_id, step__gt=to_step).delete()
    # The step warnings again from the steps that remain (the rewound ones are trained again).
    RunWarning.objects.filter(run_id=run_id, first_step__isnull=False).delete()
    for step, metrics in (
        StepMetric.objects.filter(run_id=run_id).order_by("step").values_list("step", "metrics")
    ):
        _step_warnings_write(run_id, step, metrics)
    return steps


def evaluation_record(
    *, run_id: int, step: int, task_set_id: int, samples_per_task: int, result
) -> HeldOutEvaluation:
    """Persist one held-out evaluation (a :class:`training.heldout.HeldOutResult`), then broadcast
    it."""
    evaluation = HeldOutEvaluation.objects.create(
        run_id=run_id,
        step=step,
        task_set_id=task_set_id,
        tasks=result.tasks,
        samples_per_task=samples_per_task,
        pass_at_k=result.pass_at_k,
        reward_mean=result.reward_mean,
        dropped=result.dropped,
        seconds=result.seconds,
    )
    broadcast_run_event(run_id, evaluation_event(evaluation))
    return evaluation


def progress_retired(summary: dict) -> dict:
    """``summary`` once its long phase is over (steps landed, or the run ended): no ``progress``
    (the run is no longer in that phase), the warm start's last figures kept as ``warm_start``
    (``{"epochs_done", "epochs", "detail", "at"}``) for whoever reads them later."""
    out = {k: v for k, v in summary.items() if k != "progress"}
    progress = summary.get("progress") or {}
    if progress.get("phase") == "sft":
        out["warm_start"] = {
            "epochs_done": progress.get("done"),
            "epochs": progress.get("total"),
            "detail": progress.get("detail", ""),
            "at": progress.get("at"),
        }
    return out


def run_summary_update(*, run_id: int, **fields) -> None:
    """Merge ``fields`` into the run's summary (SFT figures, checkpoint path)."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        run.summary = {**run.summary, **fields}
        run.save(update_fields=["summary"])


def run_progress_record(
    *, run_id: int, phase: str, done: int, total: int, detail: str = ""
) -> dict:
    """Record what a run is doing inside a long phase (the SFT warm start's epochs): its
    ``summary["progress"]`` becomes ``{"phase", "done", "total", "detail", "at"}`` and watchers
    get it as a ``{"kind": "progress", ...}`` event (the run page, ``train --headless``).

    Returns:
        The progress recorded.
    """
    progress = {
        "phase": phase,
        "done": int(done),
        "total": int(total),
        "detail": detail,
        "at": timezone.now().isoformat(timespec="seconds"),
    }
    run_summary_update(run_id=run_id, progress=progress)
    broadcast_run_event(run_id, {"kind": "progress", **progress})
    return progress


# --- launch attempts, resume and cancel (backends and the reconcile loop) -------------------

LAUNCH_CLAIM = "claimed"
"""``backend_ref`` of a run whose launcher is starting its trainer (no pid or Job yet)."""


def run_launch_claim(*, run_id: int, reason: str) -> TrainingRun | None:
    """Take the launch of a run: ``pending`` -> ``launching``, or a ``launching`` run no launcher
    holds yet.

    The run's ``backend_ref`` becomes :data:`LAUNCH_CLAIM` until the launcher records its
    pid or Job (:func:`run_backend_ref_set`), so a second delivery of the same launch, or
    a second launcher, gets None and starts nothing.

    Returns:
        The claimed run, or None when it is not there to launch (started, held, ended).
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status == TrainingRun.PENDING:
            run = run_transition(run_id=run_id, to_status=TrainingRun.LAUNCHING, reason=reason)
        elif run.status != TrainingRun.LAUNCHING or run.backend_ref:
            return None
        run.backend_ref = LAUNCH_CLAIM
        run.save(update_fields=["backend_ref"])
        return run


def run_backend_ref_set(*, run_id: int, backend_ref: str) -> bool:
    """Record the started trainer (``pid:N``, ``job:NS/NAME``) of a run claimed by
    :func:`run_launch_claim`.

    Returns:
        False, recording nothing, when the run moved on meanwhile (cancelled, failed): the
        caller then stops what it started.
    """
    updated = TrainingRun.objects.filter(
        pk=run_id,
        status__in=[TrainingRun.LAUNCHING, TrainingRun.RUNNING],
        backend_ref=LAUNCH_CLAIM,
    ).update(backend_ref=backend_ref)
    return updated == 1


def run_attempt_end(*, run_id: int, backend_ref: str, to_status: str, reason: str) -> bool:
    """Record that the attempt ``backend_ref`` of a ``launching``/``running`` run ended: move it to
    ``to_status``.

    Does nothing (False) when the run has moved on: it reached a status of its own (the
    trainer recorded success or failure, someone cancelled it) or another attempt holds it.
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.backend_ref != backend_ref or run.status not in (
            TrainingRun.LAUNCHING,
            TrainingRun.RUNNING,
        ):
            return False
        run_transition(run_id=run_id, to_status=to_status, reason=reason)
    return True


def run_resume(*, run_id: int, reason: str) -> int:
    """Move an ``interrupted`` run back to ``launching`` for its next attempt; count the resume.

    ``summary["resumes"]`` grows by one and ``backend_ref`` is cleared, so the next launch
    (:func:`run_launch_claim`) takes it. The caller dispatches that launch.

    Returns:
        The attempt number the launch will use (resumes + 1; the first launch is 1).

    Raises:
        InvalidTransition: the run is not ``interrupted`` (another pass resumed or cancelled it).
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status != TrainingRun.INTERRUPTED:
            raise InvalidTransition(
                f"run {run_id} is {run.status}, not interrupted: nothing to resume"
            )
        resumes = int(run.summary.get("resumes", 0)) + 1
        run_transition(run_id=run_id, to_status=TrainingRun.LAUNCHING, reason=reason)
        run_summary_update(run_id=run_id, resumes=resumes)
        TrainingRun.objects.filter(pk=run_id).update(backend_ref="")
    return resumes + 1


# --- drift and onset alerts (training.drift raises them; the console acknowledges them) ---------


def alerts_raise(
    *, run_id: int, step: int, candidates: list, cooldown_steps: int | None = None
) -> list:
    """Persist what the drift detectors saw at ``step``, merging repeats, then tell the run's
    watchers.

    A candidate (:class:`training.drift.AlertCandidate`; its own ``step``, else ``step``) whose
    run, stream and detector have an alert whose ``last_step`` is at most ``cooldown_steps``
    before it is merged into that alert (``repeats`` + 1, ``last_step`` moved on, severity
    raised to the higher one) instead of stored again; an acknowledged alert merges too (the
    acknowledgement covers the condition going on). A candidate at or before the alert's
    ``last_step`` is a second delivery of a step already counted and changes nothing.

    Args:
        cooldown_steps: None reads ``drift.cooldown_steps`` of the run's config.

    Returns:
        The alerts created or updated, each once, in the order first touched; each was
        broadcast as ``{"kind": "alert", ...}`` (:func:`training.selectors.alert_event`).
    """
    # Imported here: drift loads numpy, scipy and river, which the web and workers never need.
    from training.drift import SEVERITY_RANK, DriftConfig  # noqa: PLC0415

    if cooldown_steps is None:
        config = TrainingRun.objects.values_list("config", flat=True).get(pk=run_id) or {}
        cooldown_steps = DriftConfig.from_config(config.get("drift") or {}).cooldown_steps
    touched: dict[int, Alert] = {}
    with transaction.atomic():
        for candidate in candidates:
            at = candidate.step if getattr(candidate, "step", None) is not None else step
            latest = (
                Alert.objects.select_for_update()
                .filter(run_id=run_id, stream=candidate.stream, detector=candidate.detector)
                .order_by("-last_step", "-id")
                .first()
            )
            if latest is not None and at - latest.last_step <= cooldown_steps:
                if at <= latest.last_step:
                    continue
                latest.repeats += 1
                latest.last_step = at
                fields = ["repeats", "last_step"]
                if SEVERITY_RANK.get(candidate.severity, 0) > SEVERITY_RANK.get(latest.severity, 0):
                    latest.severity, latest.message = candidate.severity, candidate.message
                    latest.statistic, latest.threshold = candidate.statistic, candidate.threshold
                    latest.window = candidate.window
                    fields += ["severity", "message", "statistic", "threshold", "window"]
                latest.save(update_fields=fields)
                touched[latest.pk] = latest
                continue
            alert = Alert.objects.create(
                run_id=run_id,
                step=at,
                last_step=at,
                stream=candidate.stream,
                detector=candidate.detector,
                statistic=float(candidate.statistic),
                threshold=float(candidate.threshold),
                window=max(0, int(candidate.window)),
                severity=candidate.severity,
                message=candidate.message,
            )
            touched[alert.pk] = alert
    for alert in touched.values():
        broadcast_run_event(run_id, alert_event(alert))
    return list(touched.values())


def drift_step(run_id: int, step: int, config=None) -> list:
    """The trainer's hook, called after step ``step`` of run ``run_id`` is recorded: what the
    drift detectors saw (:func:`training.drift.drift_candidates`, this process's monitor of the
    run) raised as alerts (:func:`alerts_raise`, deduplicated over ``config.cooldown_steps``).

    Monitoring never stops training: an error here is logged (with its traceback), the run's
    cached monitor is dropped (the next call rebuilds it) and no alert is returned.

    Args:
        config: a :class:`training.drift.DriftConfig`; None: the documented defaults.

    Returns:
        The :class:`training.models.Alert` rows created or updated (deduplicated).
    """
    # Imported here: drift loads numpy, scipy and river, which the web and workers never need.
    from training.drift import DriftConfig, drift_candidates, forget_monitor  # noqa: PLC0415

    config = config or DriftConfig()
    try:
        candidates = drift_candidates(run_id, step, config)
        if not candidates:
            return []
        return alerts_raise(
            run_id=run_id, step=step, candidates=candidates, cooldown_steps=config.cooldown_steps
        )
    except Exception:  # alerts are advisory; the step is already recorded
        log.exception("drift detection failed at step %s of run %s", step, run_id)
        forget_monitor(run_id)
        return []


def alert_acknowledge(*, alert_id: int, user, note: str):
    """Record that ``user`` saw alert ``alert_id`` and why it needs nothing more (or what was done).

    Idempotent: an alert already acknowledged keeps its first acknowledgement (who, when,
    note) and nothing is broadcast again. A new acknowledgement is broadcast as an alert event.

    Raises:
        PermissionDenied: ``user`` is neither a curator nor holds ``training.change_trainingrun``.
        ValueError: ``note`` is empty.
        Alert.DoesNotExist: no such alert.
    """
    if not may_operate_run(user):
        raise PermissionDenied("only curators and operators may acknowledge alerts")
    note = (note or "").strip()
    if not note:
        raise ValueError("write a note: what was checked, or what was done about the alert")
    with transaction.atomic():
        alert = Alert.objects.select_for_update().get(pk=alert_id)
        changed = alert.acknowledged_at is None
        if changed:
            alert.acknowledged_at = timezone.now()
            alert.acknowledged_by = user
            alert.acknowledgement_note = note
            alert.save(update_fields=["acknowledged_at", "acknowledged_by", "acknowledgement_note"])
    if changed:
        broadcast_run_event(alert.run_id, alert_event(alert))
    return alert


def monitor_scores_record(*, trajectory_ids, monitors) -> dict:
    """Score trajectories with monitors (training.monitors) and store one ``MonitorScore`` per
    trajectory and monitor.

    Idempotent per (trajectory, monitor): a pair already scored is skipped (no second LLM call,
    no second charge on its token budget); a pair whose last verdict failed (timeout, malformed
    answer, budget spent: ``details["failed"]``) is scored again and its row replaced. The
    monitors run outside any transaction (an LLM call may take seconds); the rows are written
    in bulk, in one transaction. A monitor that raises is recorded as a failed verdict.

    Returns:
        ``{"scored": n, "failed": n, "skipped": n}``.
    """
    ids = sorted(set(trajectory_ids))
    names = [monitor.name for monitor in monitors]
    done = {
        (t, m)
        for t, m, details in MonitorScore.objects.filter(
            trajectory_id__in=ids, monitor__in=names
        ).values_list("trajectory_id", "monitor", "details")
        if not (details or {}).get("failed")
    }
    wanted = [(pk, monitor) for pk in ids for monitor in monitors if (pk, monitor.name) not in done]
    trajectories = {
        t.pk: t
        for t in Trajectory.objects.filter(pk__in={pk for pk, _m in wanted})
        .select_related("task_version__test_suite")
        .prefetch_related("turns")
    }
    views: dict[int, dict] = {}
    rows = []
    for pk, monitor in wanted:
        if pk not in trajectories:
            continue
        if pk not in views:
            views[pk] = trajectory_view(trajectories[pk])
        try:
            with log_context(
                trajectory_id=pk
            ):  # what the monitor logs (an LLM timeout...) names it
                verdict = monitor.score(views[pk])
        except Exception as exc:  # noqa: BLE001 - a monitor's bug is recorded, never fatal to the run
            verdict = failure(f"monitor raised {type(exc).__name__}: {str(exc)[:200]}")
        details = dict(verdict.details)
        if verdict.failed:
            details["failed"] = True
        rows.append(
            MonitorScore(
                trajectory_id=pk,
                monitor=monitor.name,
                score=float(verdict.score),
                reason=storable(verdict.reason[:2000]),
                details=storable(details),
            )
        )
    with transaction.atomic():
        MonitorScore.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["trajectory", "monitor"],
            update_fields=["score", "reason", "details"],
        )
    failed = sum(1 for row in rows if row.details.get("failed"))
    return {
        "scored": len(rows) - failed,
        "failed": failed,
        "skipped": len(ids) * len(monitors) - len(wanted),
    }


def run_monitors_step(*, run_id: int, step: int, include_llm: bool) -> dict:
    """Score one step's trajectories with the run's monitors: the rules, and the LLM judge
    (``llm_monitor`` in the run config) when ``include_llm``. The LLM monitor's budget counts
    what the run's stored LLM scores already spent.

    Returns:
        As :func:`monitor_scores_record`.
    """
    run = TrainingRun.objects.get(pk=run_id)
    # The trainer's Scorer already ran every detector on these trajectories, with their full
    # results, and stored the flags and evidence: the rules score those, not a second scan.
    monitors = [RuleMonitor(rescan=False)]
    llm = run.config.get("llm_monitor") or {}
    if include_llm and llm:
        spent = 0
        stored = MonitorScore.objects.filter(
            Q(trajectory__run_id=run_id) & Q(monitor__startswith="llm:")
        )
        for details in stored.values_list("details", flat=True):
            spent += int(((details or {}).get("tokens") or {}).get("total", 0))
        monitors.append(LlmMonitor(LlmMonitorConfig.from_config(llm), tokens_used=spent))
    ids = list(Trajectory.objects.filter(run_id=run_id, step=step).values_list("id", flat=True))
    return monitor_scores_record(trajectory_ids=ids, monitors=monitors)
