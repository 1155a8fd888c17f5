"""Run by tests/training/test_ddp_matches_single_rank.py under torchrun (1 or 2 ranks).

Every rank builds the same tiny policy and the same global batch of 4 groups of 3
synthetic trajectories, takes its share of the groups, and runs two GRPO updates
through DistributedDataParallel (gloo). Rank 0 writes the parameters and the metrics.
"""

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup()

import torch  # noqa: E402

from training import distributed  # noqa: E402
from training.agents.trajectory import AgentTrajectory, AgentTurn  # noqa: E402
from training.config import RunConfig  # noqa: E402
from training.policy import build_default_policy  # noqa: E402
from training.rollout import Rollout, TaskSpec  # noqa: E402
from training.update import grpo_update  # noqa: E402


def global_batch(policy, config, seed=11):
    """4 groups x 3 trajectories with varied lengths, an observation turn and fixed rewards; the
    ids drawn from a generator seeded ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    task = TaskSpec(
        task_version_id=1,
        prompt="",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=1,
    )
    rollouts = []
    for group in range(4):
        for index in range(3):
            prompt = torch.randint(5, 200, (3 + group,), generator=gen).tolist()
            first = torch.randint(5, 200, (2 + index,), generator=gen).tolist()
            observation = torch.randint(5, 200, (4,), generator=gen).tolist()
            second = torch.randint(5, 200, (1 + group + index,), generator=gen).tolist()
            turns = [
                AgentTurn(0, first, [0.0] * len(first), "", True, observation_ids=observation),
                AgentTurn(1, second, [0.0] * len(second), "", True),
            ]
            reward = float((group + index * 2) % 3) / 2  # groups with differing rewards
            rollouts.append(
                Rollout(
                    task=task,
                    group=group,
                    index_in_group=index,
                    trajectory=AgentTrajectory.of(prompt, turns),
                    reward=reward,
                    reward_components={"correctness": reward},
                )
            )
    return rollouts


def main(out_path: str, aggregation: str) -> None:
    ranks = distributed.setup()
    config = RunConfig(
        loss_aggregation=aggregation, kl_coef=0.1, clip_high=0.28, ppo_epochs=2, lr=0.5
    )
    policy = build_default_policy(
        ["def f(x):\n    return x + 1\n"] * 8,
        vocab_size=300,
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=128,
        seed=5,
        device=ranks.device,
    )
    reference = build_default_policy(
        ["def f(x):\n    return x + 1\n"] * 8,
        vocab_size=300,
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=128,
        seed=6,
        device=ranks.device,
    ).model
    model = distributed.wrap(policy.model, ranks)
    # SGD: the parameters move by the all-reduced gradient itself. (Adam divides by the
    # gradient's own magnitude, which turns float-rounding noise on near-zero entries into
    # full-size steps and would hide what this test compares.)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    rollouts = global_batch(policy, config)
    mine = ranks.shard(4)
    local = [r for r in rollouts if r.group in mine]
    metrics = [
        grpo_update(policy, optimizer, local, config, model=model, reference=reference)
        for _ in range(2)
    ]
    if ranks.is_main:
        torch.save({k: v.detach().cpu() for k, v in policy.model.state_dict().items()}, out_path)
        with open(out_path + ".json", "w") as handle:
            json.dump(metrics, handle)
    # Free the DDP wrapper while the process group still exists, every rank past the writes.
    del model, optimizer
    distributed.barrier()
    distributed.teardown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
