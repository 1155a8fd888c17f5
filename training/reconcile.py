"""The reconcile loop: keep every unfinished run's status true to its backend, and resume.

Celery beat runs :func:`runs_reconcile` every ``CRUCIBLE_RECONCILE_INTERVAL_S`` seconds
(``training.tasks.runs_reconcile_task``). For each ``launching``/``running`` run it asks
the run's backend about its trainer:

* still there (``active``): nothing to do;
* failed or vanished (a pod OOMKilled or evicted, a deadline, a deleted Job, a dead
  process): the run is ``interrupted`` with the backend's reason;
* finished successfully while the run has no final status: the run ``failed`` (the
  trainer exited without recording success);
* never started ``LAUNCH_GRACE_S`` seconds after launching: ``interrupted``.

A ``pending`` run older than ``PENDING_GRACE_S`` seconds whose launch message is neither
queued nor held by a worker (training/inflight.py reads the broker) lost its launch (a
broker restarted empty, a publish that failed): its launch is sent again. The database is
the source of truth; sending a launch twice starts nothing twice (the launch claims the run
under a row lock). ``summary["launch_redispatches"]`` counts these.

An ``interrupted`` run whose config says ``resume_on_interrupt`` and which has been
resumed fewer than ``max_resumes`` times goes back to ``launching``: what is left of the
old attempt is stopped, ``summary["resumes"]`` grows by one and the backend launches
attempt resumes + 1 through Celery; the trainer continues from the last checkpoint.
Otherwise the run ``failed``, saying why it was not resumed, and what is left of its
attempt is stopped.

Every move goes through the state machine under a row lock and checks which attempt it
is about, so a pass racing the trainer, a launcher or another pass changes nothing it
should not. A backend that cannot be asked (the Kubernetes API unreachable) leaves the
run as it is until the next pass: an infrastructure error is not a lost trainer.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from training import services
from training.backends import BACKENDS
from training.inflight import launches_in_flight
from training.models import RunTransition, TrainingRun
from training.routing import launch_queue

log = logging.getLogger(__name__)

LAUNCH_GRACE_S = 600
"""Seconds a ``launching`` run may wait for its launcher to record a trainer (pid or Job)."""

PENDING_GRACE_S = 60
"""Seconds a ``pending`` run may wait before the loop looks for its launch message: a run is
created, then its launch is sent; a pass between the two must not send a second one."""

DEFAULT_RESUME_ON_INTERRUPT = True
DEFAULT_MAX_RESUMES = 2


def runs_reconcile() -> dict[int, str]:
    """Reconcile every ``pending``, ``launching``, ``running`` and ``interrupted`` run once.

    Returns:
        Run id -> what was done: ``active`` (left alone), ``waiting`` (its launcher is still
        starting it, or its launch message is queued), ``redispatched`` (pending with its launch
        lost: sent again), ``resumed`` (interrupted, now relaunched), ``failed``, ``skipped`` (it
        moved on meanwhile) or ``error`` (the backend or the broker could not be asked; logged,
        retried next pass). The run's transitions record every move with its reason.
    """
    open_statuses = [TrainingRun.LAUNCHING, TrainingRun.RUNNING, TrainingRun.INTERRUPTED]
    done: dict[int, str] = _pending_reconcile()
    for run_id in (
        TrainingRun.objects.filter(status__in=open_statuses)
        .order_by("pk")
        .values_list("pk", flat=True)
    ):
        try:
            done[run_id] = run_reconcile(run_id)
        except Exception:
            log.exception("reconcile of run %s failed; retrying next pass", run_id)
            done[run_id] = "error"
    return done


def _pending_reconcile() -> dict[int, str]:
    """Send again the launch of every ``pending`` run past :data:`PENDING_GRACE_S` whose launch
    message the broker does not hold (see the module docstring)."""
    cutoff = timezone.now() - timedelta(seconds=PENDING_GRACE_S)
    stale = list(
        TrainingRun.objects.filter(status=TrainingRun.PENDING, created_at__lt=cutoff)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not stale:
        return {}
    try:
        in_flight = launches_in_flight(sorted({launch_queue(run_id) for run_id in stale}))
    except Exception:
        log.exception("the broker could not be read; pending runs are looked at next pass")
        return dict.fromkeys(stale, "error")
    from training.tasks import run_launch  # noqa: PLC0415 (a cycle: training.tasks imports us)

    done: dict[int, str] = {}
    for run_id in stale:
        if run_id in in_flight:
            done[run_id] = "waiting"
            continue
        try:
            run_launch.delay(run_id)
        except Exception:
            log.exception("run %s: its lost launch could not be sent again", run_id)
            done[run_id] = "error"
            continue
        count = int(
            (TrainingRun.objects.get(pk=run_id).summary or {}).get("launch_redispatches", 0)
        )
        services.run_summary_update(run_id=run_id, launch_redispatches=count + 1)
        log.warning(
            "run %s was pending with no launch in flight; its launch was sent again", run_id
        )
        done[run_id] = "redispatched"
    return done


def run_reconcile(run_id: int) -> str:
    """Reconcile one run with its backend (see the module docstring); return what was done.

    Raises:
        Exception: the backend could not be asked (API unreachable...); the run is unchanged.
    """
    run = TrainingRun.objects.get(pk=run_id)
    backend = BACKENDS.get(run.backend)
    if run.status in (TrainingRun.LAUNCHING, TrainingRun.RUNNING):
        if backend is None:
            ended = services.run_attempt_end(
                run_id=run_id,
                backend_ref=run.backend_ref,
                to_status=TrainingRun.FAILED,
                reason=f"unknown backend {run.backend!r}; known: {', '.join(BACKENDS)}",
            )
            return "failed" if ended else "skipped"
        if run.backend_ref in ("", services.LAUNCH_CLAIM):
            if _since_last_transition(run) < timedelta(seconds=LAUNCH_GRACE_S):
                return "waiting"
            reason = (
                f"no trainer was started within {LAUNCH_GRACE_S} s of launching (the launch was "
                "lost)"
            )
            if not services.run_attempt_end(
                run_id=run_id,
                backend_ref=run.backend_ref,
                to_status=TrainingRun.INTERRUPTED,
                reason=reason,
            ):
                return "skipped"
        else:
            status = backend.status(run)
            if status.state == "active":
                return "active"
            if status.state == "succeeded":
                ended = services.run_attempt_end(
                    run_id=run_id,
                    backend_ref=run.backend_ref,
                    to_status=TrainingRun.FAILED,
                    reason=f"the trainer exited without recording success ({status.reason})",
                )
                return "failed" if ended else "skipped"
            if not services.run_attempt_end(
                run_id=run_id,
                backend_ref=run.backend_ref,
                to_status=TrainingRun.INTERRUPTED,
                reason=status.reason,
            ):
                return "skipped"
        run.refresh_from_db()
        if run.status != TrainingRun.INTERRUPTED:
            return "skipped"
        return _resume_or_fail(run, backend)
    if run.status == TrainingRun.INTERRUPTED:
        return _resume_or_fail(run, backend)
    return "skipped"


def _since_last_transition(run: TrainingRun) -> timedelta:
    last = (
        RunTransition.objects.filter(run=run)
        .order_by("-at", "-id")
        .values_list("at", flat=True)
        .first()
    )
    return timezone.now() - (last or run.created_at)


def _resume_or_fail(run: TrainingRun, backend) -> str:
    """An interrupted run: relaunch it if its config allows another resume, else fail it saying
    why."""
    config = run.config or {}
    resume = config.get("resume_on_interrupt", DEFAULT_RESUME_ON_INTERRUPT)
    max_resumes = config.get("max_resumes", DEFAULT_MAX_RESUMES)
    if isinstance(max_resumes, bool) or not isinstance(max_resumes, int):
        max_resumes = DEFAULT_MAX_RESUMES
    resumes = int((run.summary or {}).get("resumes", 0))
    why = run.status_reason or "no reason recorded"
    if backend is None:
        return _fail(run, None, f"not resumed: unknown backend {run.backend!r}; interrupted: {why}")
    if resume is not True:
        return _fail(run, backend, f"not resumed: resume_on_interrupt is off; interrupted: {why}")
    if resumes >= max_resumes:
        return _fail(
            run,
            backend,
            f"resumes exhausted ({resumes} of max_resumes={max_resumes} used); "
            f"last interruption: {why}",
        )
    try:
        attempt = services.run_resume(
            run_id=run.pk, reason=f"resume {resumes + 1} of {max_resumes} after: {why}"
        )
    except services.InvalidTransition:
        return "skipped"  # another pass resumed it, or it was cancelled
    try:
        backend.cancel(run)  # what is left of the old attempt: a stuck pod, a Job, a process
    except Exception:
        log.exception(
            "run %s: could not clean up the attempt before %s; launching anyway", run.pk, attempt
        )
    from training.tasks import run_launch  # noqa: PLC0415 (a cycle: training.tasks imports us)

    run_launch.delay(run.pk)
    log.info("run %s resumed as attempt %s", run.pk, attempt)
    return "resumed"


def _fail(run: TrainingRun, backend, reason: str) -> str:
    """Fail an interrupted run and stop what is left of its attempt (a pod that cannot start holds
    its GPUs).

    The interruption's reason (``OOMKilled``, ``Evicted``...) stays recorded on the run.
    """
    try:
        services.run_transition(run_id=run.pk, to_status=TrainingRun.FAILED, reason=reason)
    except services.InvalidTransition:
        return "skipped"
    if backend is not None:
        try:
            backend.cancel(run)
        except Exception:
            log.exception("run %s failed; could not stop what is left of its attempt", run.pk)
    return "failed"
