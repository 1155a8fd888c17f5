"""Two CPU ranks (torchrun, gloo, DistributedDataParallel) end with the same parameters as one
rank on the same global batch: rollouts are sharded by group and every rank normalises by
the global token and row counts."""

import json
from pathlib import Path

import pytest
import torch

from tests.training.torchrun import torchrun
from training.policy import build_default_policy

WORKER = Path(__file__).with_name("ddp_update_worker.py")

pytestmark = pytest.mark.slow


def run_ranks(nproc: int, out: Path, aggregation: str) -> tuple[dict, list]:
    torchrun(WORKER, nproc, str(out), aggregation)
    return torch.load(out, weights_only=True), json.loads(Path(str(out) + ".json").read_text())


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
def test_two_ranks_match_one_rank(tmp_path, aggregation):
    single, single_metrics = run_ranks(1, tmp_path / "one.pt", aggregation)
    double, double_metrics = run_ranks(2, tmp_path / "two.pt", aggregation)
    assert single.keys() == double.keys()
    for name in single:
        assert torch.allclose(single[name], double[name], atol=1e-5, rtol=1e-4), name
    # the update moved the parameters at all (else the comparison proves nothing)
    fresh, _ = run_ranks_fresh(tmp_path)
    assert any(not torch.allclose(fresh[n], single[n]) for n in single)
    for one, two in zip(single_metrics, double_metrics):
        assert one["tokens/trained"] == two["tokens/trained"] > 0
        assert one["groups/total"] == two["groups/total"] == 4
        assert two["loss/policy"] == pytest.approx(one["loss/policy"], abs=1e-5)
        assert two["loss/kl"] == pytest.approx(one["loss/kl"], abs=1e-6)
        assert two["policy/entropy"] == pytest.approx(one["policy/entropy"], abs=1e-5)


def run_ranks_fresh(tmp_path):
    """The policy's initial parameters, built the way the worker builds them."""
    policy = build_default_policy(
        ["def f(x):\n    return x + 1\n"] * 8,
        vocab_size=300,
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=128,
        seed=5,
        device=torch.device("cpu"),
    )
    return {k: v.detach() for k, v in policy.model.state_dict().items()}, None
