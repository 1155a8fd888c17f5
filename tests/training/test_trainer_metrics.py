"""A real trainer process with CRUCIBLE_METRICS_PORT serves its step metrics while it trains: the
step, the time per phase, the mean reward and tokens/s, matching the step it recorded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.database import child_env
from tests.metrics import scrape, value, wait_for
from tests.ports import free_port
from tests.training.conftest import ROOT, tiny_run
from training import services
from training.kubernetes import trainer_command
from training.models import StepMetric, TrainingRun

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_trainer_serves_its_step_metrics_while_it_trains(trained_task_set):
    run = tiny_run(trained_task_set, steps=50)
    services.run_transition(run_id=run.pk, to_status=TrainingRun.LAUNCHING, reason="test launch")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *trainer_command(run.pk, 1)[1:]],
        cwd=ROOT,
        env=child_env(OMP_NUM_THREADS="1", CRUCIBLE_METRICS_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    label = str(run.pk)
    try:

        def stepped() -> bool:
            assert proc.poll() is None, proc.stdout.read()
            try:
                return (
                    value(scrape(port, timeout_s=0), "crucible_trainer_step", run_id=label) or 0
                ) >= 1
            except OSError:  # not listening yet
                return False

        wait_for(stepped, timeout_s=400, what="a recorded step in the trainer's metrics")
        text = scrape(port)
    finally:
        services.run_transition(run_id=run.pk, to_status=TrainingRun.CANCELLED, reason="test done")
        try:
            proc.wait(timeout=120)  # it stops between steps
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    step = int(value(text, "crucible_trainer_step", run_id=label))
    record = StepMetric.objects.get(run=run, step=step)
    assert value(text, "crucible_trainer_reward_mean", run_id=label) == pytest.approx(
        record.reward_mean
    )
    for phase in ("generation", "update"):
        assert (
            value(text, "crucible_trainer_step_phase_seconds_count", run_id=label, phase=phase)
            == step
        )
        assert value(text, "crucible_trainer_step_phase_seconds_sum", run_id=label, phase=phase) > 0
    seconds = sum(
        record.metrics[k]
        for k in ("timing/generation_s", "timing/sandbox_s", "timing/grading_s", "timing/update_s")
    )
    assert value(text, "crucible_trainer_tokens_per_second", run_id=label) == pytest.approx(
        record.metrics["tokens/generated"] / seconds
    )
