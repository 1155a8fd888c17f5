"""A run of 6 steps killed with SIGKILL after step 3 and resumed ends exactly like one that
ran through: same parameters, same trajectories and step records, none duplicated. A resume
with nothing left to train fails instead of reporting success."""

import os
import shutil
import signal

import pytest
from safetensors.torch import load_file

from tests.training.conftest import finish, launch, tiny_run, wait_for
from training import services
from training.checkpoint import latest_checkpoint
from training.models import StepMetric, TrainingRun, Trajectory
from training.paths import run_dir

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def trajectory_records(run):
    """Everything a step wrote about its trajectories, timings left out."""
    rows = []
    for t in (
        Trajectory.objects.filter(run=run)
        .prefetch_related("turns")
        .order_by("step", "group", "index_in_group")
    ):
        rows.append(
            (
                t.step,
                t.group,
                t.index_in_group,
                t.task_version_id,
                t.status,
                t.reward,
                t.advantage,
                t.flags,
                t.tests_passed,
                t.tests_total,
                t.final_code,
                t.reward_components,
                [
                    (
                        u.index,
                        u.token_ids,
                        u.logprobs,
                        u.code,
                        u.observation_token_ids,
                        u.sandbox_status,
                    )
                    for u in t.turns.all()
                ],
            )
        )
    return rows


def step_records(run):
    return [
        (
            s.step,
            s.reward_mean,
            s.reward_histogram,
            {k: v for k, v in s.metrics.items() if not k.startswith("timing/")},
        )
        for s in StepMetric.objects.filter(run=run).order_by("step")
    ]


def final_weights(run):
    return load_file(str(run_dir(run.pk) / "checkpoint-final" / "model.safetensors"))


def test_sigkill_after_step_3_then_resume_matches_an_uninterrupted_run(trained_task_set):
    straight = tiny_run(trained_task_set, steps=6)
    out = finish(launch(straight))
    straight.refresh_from_db()
    assert straight.status == TrainingRun.SUCCEEDED, out

    killed = tiny_run(trained_task_set, steps=6)
    proc = launch(killed)
    # "after step 3": its record and its checkpoint are both written
    wait_for(
        lambda: (latest_checkpoint(run_dir(killed.pk)) or run_dir(killed.pk)).name >= "step-000003",
        proc=proc,
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    killed.refresh_from_db()
    assert killed.status == TrainingRun.RUNNING  # nobody got to say goodbye
    recorded_before = StepMetric.objects.filter(run=killed).count()
    assert recorded_before >= 3

    services.run_transition(
        run_id=killed.pk, to_status=TrainingRun.INTERRUPTED, reason="trainer killed (test)"
    )
    out = finish(launch(killed))
    killed.refresh_from_db()
    assert killed.status == TrainingRun.SUCCEEDED, out
    assert killed.summary["resumed_from_step"] >= 3
    assert "sft/loss_last" in killed.summary  # written once, by the first launch

    assert [s.step for s in StepMetric.objects.filter(run=killed).order_by("step")] == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]
    assert step_records(killed) == step_records(straight)
    assert trajectory_records(killed) == trajectory_records(straight)
    a, b = final_weights(straight), final_weights(killed)
    assert a.keys() == b.keys()
    different = [name for name in a if not (a[name] == b[name]).all()]
    assert not different, f"parameters differ after resume: {different[:5]}"
    # the retention setting kept the two newest checkpoints only
    kept = sorted(p.name for p in (run_dir(killed.pk) / "checkpoints").iterdir())
    assert kept == ["step-000005", "step-000006"]


def test_resume_with_no_step_left_is_an_error(trained_task_set):
    done = tiny_run(trained_task_set, steps=2)
    finish(launch(done))
    done.refresh_from_db()
    assert done.status == TrainingRun.SUCCEEDED

    again = tiny_run(trained_task_set, steps=2)
    shutil.copytree(run_dir(done.pk) / "checkpoints", run_dir(again.pk) / "checkpoints")
    proc = launch(again)
    out = finish(proc)
    again.refresh_from_db()
    assert proc.returncode != 0
    assert again.status == TrainingRun.FAILED
    assert "would train 0 steps" in again.status_reason, again.status_reason
    assert not StepMetric.objects.filter(run=again).exists(), out
