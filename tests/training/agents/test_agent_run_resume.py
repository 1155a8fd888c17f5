"""A rollout_mode='agent' run killed with SIGKILL after a checkpoint and relaunched trains exactly
the steps that remain: the steps before the checkpoint are kept as the first launch wrote them,
every later step is written once, and the warm start is not repeated."""

import os
import signal

import pytest

from tests.training.conftest import finish, launch, tiny_run, wait_for
from training import services
from training.checkpoint import latest_checkpoint
from training.models import StepMetric, TrainingRun, Trajectory
from training.paths import run_dir

from .test_agent_training_run import AGENT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_killed_agent_run_resumes_with_the_remaining_steps(trained_task_set):
    run = tiny_run(trained_task_set, **{**AGENT, "steps": 4})
    proc = launch(run)
    wait_for(
        lambda: (latest_checkpoint(run_dir(run.pk)) or run_dir(run.pk)).name >= "step-000002",
        proc=proc,
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    checkpoint = latest_checkpoint(run_dir(run.pk)).name
    resumed_from = int(checkpoint.rsplit("-", 1)[1])
    assert 2 <= resumed_from < 4
    kept = {
        t.pk: (t.step, t.group, t.index_in_group, t.reward)
        for t in Trajectory.objects.filter(run=run, step__lte=resumed_from)
    }
    assert {step for step, *_ in kept.values()} == set(range(1, resumed_from + 1))
    sft = dict(TrainingRun.objects.get(pk=run.pk).summary)

    services.run_transition(
        run_id=run.pk, to_status=TrainingRun.INTERRUPTED, reason="trainer killed (test)"
    )
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["resumed_from_step"] == resumed_from
    assert run.status_reason == f"trained steps {resumed_from + 1}..4"
    # the warm start ran once, in the first launch
    assert run.summary["sft/loss_last"] == sft["sft/loss_last"]
    assert [s.step for s in StepMetric.objects.filter(run=run).order_by("step")] == [1, 2, 3, 4]
    # the steps before the checkpoint are the first launch's own rows; the rest are new, once
    before = {
        t.pk: (t.step, t.group, t.index_in_group, t.reward)
        for t in Trajectory.objects.filter(run=run, step__lte=resumed_from)
    }
    assert before == kept
    per_step = {step: Trajectory.objects.filter(run=run, step=step).count() for step in range(1, 5)}
    assert len(set(per_step.values())) == 1 and per_step[1] > 0, per_step
