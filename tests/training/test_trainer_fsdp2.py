"""The whole trainer with ``sharding: "fsdp2"`` under torchrun, two CPU ranks (gloo), activation
checkpointing on: the run succeeds, its checkpoints hold a DCP shard per rank (no whole
``model.pt``), its summary holds the memory report (each rank half of the float32 weights,
gradients and AdamW state), each step the seconds of the weight gather. Its checkpoint after
step 2 of 3, given to a new run, resumes on two ranks exactly (the same step 3: trajectories,
records and final weights bit for bit) and in one process (the same tasks drawn for step 3)."""

import shutil

import pytest
import torch
from safetensors.torch import load_file

from tests.training.conftest import finish, launch, tiny_run
from tests.training.test_resume_after_sigkill import step_records, trajectory_records
from training.models import StepMetric, TrainingRun
from training.paths import run_dir

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FSDP2 = {"sharding": "fsdp2", "activation_checkpointing": True, "keep_checkpoints": 3}


def final_weights(run):
    return load_file(str(run_dir(run.pk) / "checkpoint-final" / "model.safetensors"))


def resumed_from_step_2(straight, trained_task_set, **config):
    """A new run of 3 steps given ``straight``'s checkpoint of step 2, trained to its end."""
    run = tiny_run(trained_task_set, steps=3, **config)
    step2 = run_dir(straight.pk) / "checkpoints" / "step-000002"
    shutil.copytree(step2, run_dir(run.pk) / "checkpoints" / "step-000002")
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["resumed_from_step"] == 2
    assert "sft/loss_last" not in run.summary  # no warm start: the weights came from the shards
    assert [s.step for s in StepMetric.objects.filter(run=run)] == [3]
    return run


def test_fsdp2_run_on_two_ranks_resumes_exactly_on_two_and_on_one(trained_task_set):
    straight = tiny_run(trained_task_set, steps=3, nproc_per_node=2, **FSDP2)
    out = finish(launch(straight))
    straight.refresh_from_db()
    assert straight.status == TrainingRun.SUCCEEDED, out
    step2 = run_dir(straight.pk) / "checkpoints" / "step-000002"
    assert not (step2 / "model.pt").exists()
    assert sorted(p.name for p in (step2 / "sharded").iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    memory = straight.summary["memory"]
    assert memory["sharding"] == "fsdp2" and memory["activation_checkpointing"] is True
    assert [r["rank"] for r in memory["ranks"]] == [0, 1]
    per_param = memory["bytes_per_param"]
    # float32 over two ranks (the largest rank's share: a dimension split in two uneven halves)
    assert per_param["weights"] == per_param["grads"] == pytest.approx(2.0, abs=0.01)
    assert per_param["rollout_weights"] == 4.0  # the whole float32 copy rollouts sample from
    steps = list(StepMetric.objects.filter(run=straight).values_list("metrics", flat=True))
    if any(m["tokens/trained"] for m in steps):  # AdamW's two float32 moments (and its step)
        assert per_param["optimizer"] == pytest.approx(4.0, abs=0.02)
    else:  # every group tied: no optimizer step, no state yet
        assert per_param["optimizer"] == 0
    assert all(r["peak"] > 0 for r in memory["ranks"])
    for metrics in steps:
        assert metrics["timing/weight_gather_s"] > 0

    again = resumed_from_step_2(straight, trained_task_set, nproc_per_node=2, **FSDP2)
    assert trajectory_records(again) == [r for r in trajectory_records(straight) if r[0] == 3]
    assert step_records(again) == step_records(straight)[2:]
    a, b = final_weights(straight), final_weights(again)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[name], b[name]) for name in a)

    alone = resumed_from_step_2(straight, trained_task_set, **FSDP2)
    assert alone.summary["memory"]["bytes_per_param"]["weights"] == 4.0  # one rank holds all
    # The sampler's state came back: step 3 draws the same tasks for the same groups. (Its
    # trajectories differ: one process samples every group in one batch, with its own draws.)
    tasks = [r[:4] for r in trajectory_records(straight) if r[0] == 3]
    assert [r[:4] for r in trajectory_records(alone)] == tasks
