"""The reconcile loop and cancel with the local backend: real processes, real signals.

The "trainer" is a harmless stand-in: a Python process that sleeps, started with
``run_trainer RUN_ID`` in its argv as the real trainer's command line has (the backend
signals a pid only while it still runs that run's trainer, so a reused pid is safe).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.training.conftest import one_task_run
from training import backends, services
from training.backends import run_cancel
from training.models import TrainingRun
from training.reconcile import runs_reconcile
from training.services import run_transition
from training.tasks import run_cancel_task, runs_reconcile_task


@pytest.fixture
def spawn():
    """Start processes for a test; whatever is still alive at its end is killed (by pid) and
    reaped."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def stand_in_trainer(spawn, run_id: int, *, ignore_sigterm: bool = False) -> subprocess.Popen:
    """A sleeping process whose argv reads like the trainer's; it says "ready" once its signal
    handling is set."""
    code = "import signal, sys, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(60)\n"
    proc = spawn(
        [sys.executable, "-c", code, "run_trainer", str(run_id)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def make_run(backend: str = "local", **config) -> TrainingRun:
    return one_task_run(backend, **config)


def as_launched(run: TrainingRun, pid: int) -> TrainingRun:
    """What launch_local and the trainer record: claimed, the pid, then running."""
    assert (
        services.run_launch_claim(run_id=run.pk, reason="local backend: starting trainer process")
        is not None
    )
    assert services.run_backend_ref_set(run_id=run.pk, backend_ref=f"pid:{pid}")
    run_transition(run_id=run.pk, to_status=TrainingRun.RUNNING, reason="trainer started")
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_a_run_whose_trainer_died_is_interrupted(spawn):
    no_resume = make_run(resume_on_interrupt=False)
    exhausted = make_run(max_resumes=0)
    procs = {run.pk: stand_in_trainer(spawn, run.pk) for run in (no_resume, exhausted)}
    for run in (no_resume, exhausted):
        as_launched(run, procs[run.pk].pid)
    assert runs_reconcile() == {no_resume.pk: "active", exhausted.pk: "active"}

    for proc in procs.values():
        proc.kill()
        proc.wait(timeout=10)
    assert runs_reconcile() == {no_resume.pk: "failed", exhausted.pk: "failed"}
    for run in (no_resume, exhausted):
        run.refresh_from_db()
        interrupted = run.transitions.get(from_status="running", to_status="interrupted").reason
        assert f"trainer process {procs[run.pk].pid} is gone" in interrupted
        assert run.status == TrainingRun.FAILED
    assert "resume_on_interrupt is off" in no_resume.status_reason
    assert "resumes exhausted (0 of max_resumes=0 used)" in exhausted.status_reason
    assert runs_reconcile_task() == {}  # the beat task's body: nothing left to reconcile


def test_beat_runs_the_reconcile_task():
    entry = settings.CELERY_BEAT_SCHEDULE["runs-reconcile"]
    assert entry["task"] == runs_reconcile_task.name
    assert entry["schedule"] > 0


@pytest.mark.django_db
def test_cancel_stops_a_live_local_trainer(spawn):
    run = make_run()
    proc = stand_in_trainer(spawn, run.pk)
    run = as_launched(run, proc.pid)
    assert backends.local_status(run).state == "active"

    out = StringIO()
    call_command("cancel_run", str(run.pk), "--reason", "stop it", stdout=out)
    assert f"run {run.pk} cancelled" in out.getvalue()
    assert proc.wait(timeout=10) == -signal.SIGTERM
    run.refresh_from_db()
    assert run.status == TrainingRun.CANCELLED and run.status_reason == "stop it"
    assert backends.local_status(run).state == "missing"
    assert run_cancel(run_id=run.pk, reason="again") is False  # safe twice
    assert run_cancel_task(run.pk, "and again") is False  # the Celery task's body
    assert runs_reconcile() == {}  # a cancelled run is final


@pytest.mark.django_db
def test_cancel_kills_a_trainer_that_ignores_sigterm(spawn, monkeypatch):
    monkeypatch.setattr(backends, "LOCAL_STOP_GRACE_S", 0.5)
    run = make_run()
    proc = stand_in_trainer(spawn, run.pk, ignore_sigterm=True)
    as_launched(run, proc.pid)
    assert run_cancel(run_id=run.pk, reason="stop it") is True
    assert proc.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.django_db
def test_a_pid_running_another_program_is_never_signalled(spawn):
    run = make_run(resume_on_interrupt=False)
    stranger = spawn(["sleep", "60"])  # the trainer's pid, reused by an unrelated program
    run = as_launched(run, stranger.pid)
    status = backends.local_status(run)
    assert status.state == "missing" and "another program" in status.reason
    assert run_cancel(run_id=run.pk, reason="stop it") is True
    with pytest.raises(subprocess.TimeoutExpired):
        stranger.wait(timeout=0.5)  # still sleeping: not ours to stop
