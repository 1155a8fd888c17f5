"""A sharded checkpoint (torch.distributed.checkpoint, one shard per rank) written by two FSDP2
ranks after step 2 of 4 resumes bit-exactly on two ranks (same weights, AdamW moments, losses
and final weights as the run that never stopped) and loads bit-exactly into one process with
no sharding, which then trains the remaining steps to the same weights within float-rounding
tolerance (the gradient is summed in another order on one rank than over two)."""

import pytest
import torch

from tests.training.test_fsdp_matches_single_rank import ATOL, RTOL, run_worker

pytestmark = pytest.mark.slow


def assert_same_state(a: dict, b: dict) -> None:
    """Bit-equal weights and optimizer state (every slot of every parameter)."""
    assert a["weights"].keys() == b["weights"].keys()
    for name in a["weights"]:
        assert torch.equal(a["weights"][name], b["weights"][name]), name
    assert a["optimizer"].keys() == b["optimizer"].keys()
    for name, slots in a["optimizer"].items():
        assert slots.keys() == b["optimizer"][name].keys() == {"step", "exp_avg", "exp_avg_sq"}
        for slot, value in slots.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizer"][name][slot]))


def test_sharded_checkpoint_resumes_on_two_ranks_and_on_one(tmp_path):
    ckpt = tmp_path / "step-2"
    straight = run_worker(
        2,
        tmp_path / "straight.pt",
        "fsdp2",
        "0",
        "adamw",
        "4",
        "--save-at",
        "2",
        "--ckpt",
        str(ckpt),
    )
    # each rank wrote its own shard, rank 0 the metadata
    assert sorted(p.name for p in (ckpt / "sharded").iterdir()) == [
        ".metadata",
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    moved = [
        n
        for n in straight["params"]
        if not torch.equal(straight["saved"]["weights"][n], straight["params"][n])
    ]
    assert moved, "steps 3 and 4 changed nothing: the comparison would prove nothing"

    resumed = run_worker(
        2,
        tmp_path / "two.pt",
        "fsdp2",
        "0",
        "adamw",
        "4",
        "--save-at",
        "2",
        "--resume-from",
        str(ckpt),
    )
    assert_same_state(straight["saved"], resumed["loaded"])
    assert resumed["metrics"] == straight["metrics"][2:]  # steps 3 and 4, float for float
    for name in straight["params"]:
        assert torch.equal(straight["params"][name], resumed["params"][name]), name

    alone = run_worker(
        1,
        tmp_path / "one.pt",
        "ddp",
        "0",
        "adamw",
        "4",
        "--save-at",
        "2",
        "--resume-from",
        str(ckpt),
    )
    assert_same_state(straight["saved"], alone["loaded"])
    for name in straight["params"]:
        assert torch.allclose(
            straight["params"][name], alone["params"][name], atol=ATOL, rtol=RTOL
        ), name
    for a, b in zip(straight["metrics"][2:], alone["metrics"], strict=True):
        assert b["loss/policy"] == pytest.approx(a["loss/policy"], abs=1e-6)
