"""A run says what it is doing before its first step: the SFT warm start reports each epoch, the
run records it (``summary["progress"]``, broadcast to its page), and ``run_wait`` hands every
change of status or progress to its caller (``train --headless`` prints them on stderr)."""

import pytest

from tests.review.review_seed import seed_run
from training import services
from training.completion_run import sft_warm_start
from training.config import RunConfig
from training.models import StepMetric, TrainingRun
from training.policy import build_default_policy
from training.watch import run_wait

pytestmark = pytest.mark.django_db


def test_the_warm_start_reports_every_epoch(humaneval):
    _run, versions = seed_run(humaneval, tasks=2)
    config = RunConfig(steps=1, sft_epochs=3, sft_batch_size=2, n_layer=1, n_embd=32, n_head=2)
    policy = build_default_policy(
        [v.prompt + v.reference_solution for v in versions],
        n_embd=32,
        n_layer=1,
        n_head=2,
        seed=0,
        device="cpu",
    )
    seen = []
    summary = sft_warm_start(policy, versions, config, on_epoch=lambda *args: seen.append(args))
    assert [(epoch, epochs) for epoch, epochs, _loss in seen] == [(1, 3), (2, 3), (3, 3)]
    assert seen[-1][2] == pytest.approx(summary["sft/loss_last"])


def test_run_wait_reports_each_status_and_progress_change(humaneval):
    run, _versions = seed_run(humaneval, tasks=1)
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.PENDING)
    script = [
        lambda: services.run_transition(run_id=run.pk, to_status="launching", reason="claimed"),
        lambda: services.run_transition(run_id=run.pk, to_status="running", reason="started"),
        lambda: services.run_progress_record(
            run_id=run.pk, phase="sft", done=1, total=2, detail="loss 2.500"
        ),
        lambda: services.run_progress_record(
            run_id=run.pk, phase="sft", done=2, total=2, detail="loss 1.250"
        ),
        lambda: StepMetric.objects.create(run_id=run.pk, step=1, reward_mean=0.5),
        lambda: services.run_transition(run_id=run.pk, to_status="succeeded", reason="done"),
    ]
    lines, steps = [], []

    def on_progress(line):
        lines.append(line)
        if script:
            script.pop(0)()

    def on_step(step):
        steps.append(step.step)
        if script:
            script.pop(0)()

    ended = run_wait(run.pk, on_progress=on_progress, on_step=on_step, poll_s=0.01)
    assert ended.status == "succeeded" and steps == [1]
    assert lines[0] == f"run {run.pk} pending"
    assert f"run {run.pk} launching: claimed" in lines
    assert f"run {run.pk} running: SFT warm start, epoch 1 of 2 (loss 2.500)" in lines
    assert f"run {run.pk} running: SFT warm start, epoch 2 of 2 (loss 1.250)" in lines
    assert lines[-1] == f"run {run.pk} succeeded: done"
    assert len(lines) == len(set(lines))  # each change once


def test_a_warm_start_that_ends_between_two_polls_is_still_reported(humaneval):
    run, _versions = seed_run(humaneval, tasks=1)
    # the whole run (warm start, a step, the end) happened before the first poll
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.RUNNING)
    services.run_progress_record(run_id=run.pk, phase="sft", done=2, total=2, detail="loss 1.250")
    StepMetric.objects.create(run_id=run.pk, step=1, reward_mean=0.5)
    services.run_transition(run_id=run.pk, to_status="succeeded", reason="done")
    lines = []
    run_wait(run.pk, on_progress=lines.append, on_step=lambda s: lines.append(f"step {s.step}"))
    assert lines == [
        f"run {run.pk} running: SFT warm start, epoch 2 of 2 (loss 1.250)",
        "step 1",
        f"run {run.pk} succeeded: done",
    ]
