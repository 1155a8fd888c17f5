"""A real trainer process announces its phases and sandbox demand while it trains (what the
autoscaler reads), withdraws them when it ends, and records each step's phase and pool timeline."""

import time

import pytest

from sandboxes import demand as D
from tests.training.conftest import launch, tiny_run
from training.models import StepMetric, TrainingRun
from training.phase import publisher_name

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_trainer_announces_phases_and_demand_and_records_the_pool_per_step(trained_task_set):
    run = tiny_run(trained_task_set, steps=2, checkpoint_every=1)
    proc = launch(run)
    name = publisher_name(run.pk, 0)
    announced: dict[str, int] = {}  # phase -> the largest demand announced in it
    deadline = time.monotonic() + 420
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the trainer did not finish"
        entry = D.publishers("python").get(name)
        if entry:
            announced[entry["phase"]] = max(announced.get(entry["phase"], 0), entry["demand"])
        time.sleep(0.01)
    out = proc.communicate()[0]
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    # group_size 2 x tasks_per_step 2: four executions per rollout turn, as many gradings at most
    assert announced.get("rollout") == 4, announced
    assert 0 < announced.get("grading", 0) <= 4, announced
    assert name not in D.publishers("python"), "the demand outlived the trainer"

    steps = list(StepMetric.objects.filter(run=run).order_by("step"))
    assert [s.step for s in steps] == [1, 2]
    phases = [[p for _a, _b, p in s.timeline["phases"]] for s in steps]
    assert (
        phases[0][0] == "idle" and "sft" in phases[0]
    )  # the warm start lands in the first step's window
    for names in phases:
        # a phase set again (the second rollout turn) goes on in the same segment
        assert [p for p in names if p in ("rollout", "grading", "update")] == [
            "rollout",
            "grading",
            "update",
        ], names
    assert "checkpoint" in phases[1]  # step 1's checkpoint, written after its record
    for step in steps:
        assert (
            step.metrics["timing/phase_rollout_s"] > 0 and step.metrics["timing/phase_update_s"] > 0
        )
        assert (
            step.timeline["t"] and min(step.timeline["slots"]) > 0
        )  # the session's workers, sampled
    assert steps[1].timeline["start"] == steps[0].timeline["end"]
