"""A local-backend trainer recorded on another host (per-queue workers: the control worker is not
the trainer worker) is left alone by the reconcile loop and by cancel, never taken for a lost
trainer and relaunched beside the living one; on its own host it is judged as before."""

from __future__ import annotations

import socket

import pytest

from tests.training.test_reconcile_local import as_launched, make_run, spawn, stand_in_trainer  # noqa: F401
from training import backends
from training.backends import run_cancel
from training.models import RunTransition, TrainingRun
from training.reconcile import runs_reconcile

pytestmark = pytest.mark.django_db


def test_a_trainer_on_another_host_is_left_alone(spawn):  # the fixture
    run = make_run()
    trainer = stand_in_trainer(spawn, run.pk)
    as_launched(run, trainer.pid)
    TrainingRun.objects.filter(pk=run.pk).update(
        backend_ref=f"pid:{trainer.pid}@trainer-host-elsewhere"
    )
    transitions = RunTransition.objects.filter(run=run).count()

    assert runs_reconcile() == {run.pk: "error"}  # logged, retried next pass; nothing moved
    run.refresh_from_db()
    assert run.status == TrainingRun.RUNNING
    assert RunTransition.objects.filter(run=run).count() == transitions
    with pytest.raises(backends.OtherHost, match="trainer-host-elsewhere"):
        backends.local_status(run)

    assert (
        run_cancel(run_id=run.pk, reason="test") is True
    )  # recorded; the trainer stops itself at its next step
    assert trainer.poll() is None  # no signal sent to a pid of this host that is not that trainer


def test_a_trainer_on_this_host_is_judged_by_its_pid(spawn):
    run = make_run()
    trainer = stand_in_trainer(spawn, run.pk)
    as_launched(run, trainer.pid)
    TrainingRun.objects.filter(pk=run.pk).update(
        backend_ref=f"pid:{trainer.pid}@{socket.gethostname()}"
    )
    run.refresh_from_db()
    assert backends.local_status(run).state == "active"
    trainer.kill()
    trainer.wait(timeout=10)
    assert backends.local_status(run).state == "missing"
