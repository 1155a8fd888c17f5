"""Two CPU ranks under FSDP2 (torchrun, gloo, ``fully_shard`` per Qwen2 decoder layer) train a tiny
Qwen2-architecture policy for three GRPO updates and end where one process with no sharding
ends: same losses and parameters within float-rounding tolerance, with and without activation
checkpointing. Each rank holds half the weights, gradients and optimizer state."""

from pathlib import Path

import pytest
import torch

from tests.training.torchrun import torchrun

WORKER = Path(__file__).with_name("fsdp_update_worker.py")

pytestmark = pytest.mark.slow

# Reduction order differs (reduce-scatter of two half-batch gradients against one batch): the
# parameters agree to float32 rounding, not bit for bit.
ATOL, RTOL = 1e-5, 1e-4


def run_worker(nproc: int, out: Path, *args: str) -> dict:
    """Launch the worker under torchrun; rank 0's output."""
    torchrun(WORKER, nproc, str(out), *args)
    return torch.load(out, weights_only=False)


def assert_close(one: dict, two: dict) -> None:
    assert one["params"].keys() == two["params"].keys()
    for name in one["params"]:
        assert torch.allclose(one["params"][name], two["params"][name], atol=ATOL, rtol=RTOL), name
    for a, b in zip(one["metrics"], two["metrics"], strict=True):
        assert a["tokens/trained"] == b["tokens/trained"] > 0
        assert b["loss/policy"] == pytest.approx(a["loss/policy"], abs=1e-6)
        assert b["loss/kl"] == pytest.approx(a["loss/kl"], abs=1e-6)
        assert b["policy/entropy"] == pytest.approx(a["policy/entropy"], abs=1e-5)
        assert b["policy/grad_norm"] == pytest.approx(a["policy/grad_norm"], rel=1e-5)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One process, no sharding: the reference run."""
    return run_worker(1, tmp_path_factory.mktemp("one") / "one.pt", "ddp", "0", "sgd", "3")


def test_two_fsdp2_ranks_match_one_unsharded_process(tmp_path, single):
    sharded = run_worker(2, tmp_path / "two.pt", "fsdp2", "0", "sgd", "3")
    # the updates moved the parameters (else the comparison proves nothing)
    assert any(
        not torch.allclose(single["initial"][n], single["params"][n], atol=1e-3)
        for n in single["params"]
    )
    assert single["initial"].keys() == sharded["initial"].keys()
    assert all(torch.equal(single["initial"][n], sharded["initial"][n]) for n in single["initial"])
    assert len(single["metrics"]) == len(sharded["metrics"]) == 3
    assert_close(single, sharded)
    # the rollouts' whole copy holds exactly the gathered weights
    for name, value in sharded["params"].items():  # (the tied output embedding listed once)
        assert torch.equal(sharded["rollout_params"][name], value), name
    # each of the 2 ranks holds half: 2 bytes per parameter of float32 weights, gradients and
    # SGD momentum, against 4 in one process
    assert single["memory"]["bytes_per_param"] == {
        "weights": 4.0,
        "grads": 4.0,
        "optimizer": 4.0,
        "rollout_weights": 0.0,
    }
    half = sharded["memory"]["bytes_per_param"]
    assert (half["weights"], half["grads"], half["optimizer"]) == (2.0, 2.0, 2.0)
    assert half["rollout_weights"] == 4.0  # the whole float32 copy rollouts sample from
    assert [r["rank"] for r in sharded["memory"]["ranks"]] == [0, 1]
    assert all(r["peak"] > 0 for r in sharded["memory"]["ranks"])


def test_activation_checkpointing_changes_no_result(tmp_path, single):
    checkpointed = run_worker(2, tmp_path / "two-ac.pt", "fsdp2", "1", "sgd", "3")
    assert checkpointed["memory"]["activation_checkpointing"] is True
    assert_close(single, checkpointed)


def test_bf16_compute_keeps_float32_master_weights(tmp_path, single):
    """``mixed_precision: bf16`` (what ``auto`` picks on a GPU with bf16): the shards, gradients
    and optimizer state stay float32, rollouts sample from a bfloat16 copy, and the result follows
    the float32 run to bfloat16's precision."""
    mixed = run_worker(2, tmp_path / "bf16.pt", "fsdp2", "0", "sgd", "3", "--precision", "bf16")
    assert mixed["memory"]["compute_dtype"] == "bfloat16"
    assert mixed["master_dtypes"] == ["torch.float32"]
    assert all(v.dtype == torch.bfloat16 for v in mixed["rollout_params"].values())
    assert mixed["memory"]["bytes_per_param"]["rollout_weights"] == 2.0
    assert mixed["memory"]["bytes_per_param"]["weights"] == 2.0  # float32 over two ranks
    for name, value in single["params"].items():
        assert torch.allclose(mixed["params"][name], value, atol=2e-2, rtol=2e-2), name
        assert torch.equal(mixed["rollout_params"][name], mixed["params"][name].bfloat16()), name
    for a, b in zip(single["metrics"], mixed["metrics"], strict=True):
        assert b["loss/policy"] == pytest.approx(a["loss/policy"], abs=2e-2)
    # bfloat16 rounding shows: the run is not the float32 one
    assert any(not torch.equal(mixed["params"][n], v) for n, v in single["params"].items())
