"""A rollout past its time budget ends ``timeout`` while the batch goes on; a group dropped for
an infrastructure error is never scored, and its task is replayed first at the next step."""

import pytest
import torch

from sandboxes import result as R
from tasks_library.difficulty import DifficultySampler
from tests.training.rollouts import add_task, tiny_policy
from training.agents.trajectory import AgentTrajectory, AgentTurn
from training.config import RunConfig
from training.rollout import Rollout, RolloutConfig, TaskSpec, collect_rollouts
from training.trainer import TrainerState
from training.update import assign_advantages

TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n"


def spec(version_id: int) -> TaskSpec:
    return add_task(version_id, visible=TESTS, hidden=TESTS)


def test_rollout_over_its_budget_ends_timeout_and_the_batch_finishes():
    policy = tiny_policy()
    # A budget shorter than one sandbox round trip: every rollout takes its first turn, then stops.
    config = RolloutConfig(group_size=2, max_turns=3, max_new_tokens=12, timeout_s=0.001)
    rollouts, times = collect_rollouts(
        policy, [spec(1), spec(2)], config, generator=torch.Generator().manual_seed(0)
    )
    assert len(rollouts) == 4
    for rollout in rollouts:
        assert rollout.status == R.TIMEOUT and "rollout_timeout" in rollout.flags
        assert rollout.reward == 0.0 and not rollout.dropped
        assert (
            len(rollout.turns) == 1 and rollout.turns[0].sandbox_status
        )  # the turn it started ran to its end
    assert times.grading_s >= 0 and times.generation_s > 0


def test_ample_budget_grades_every_rollout():
    policy = tiny_policy()
    config = RolloutConfig(group_size=2, max_turns=1, max_new_tokens=12, timeout_s=120)
    rollouts, _ = collect_rollouts(
        policy, [spec(1)], config, generator=torch.Generator().manual_seed(0)
    )
    assert all(
        r.tests_total == 1 and "rollout_timeout" not in r.flags and r.status != R.TIMEOUT
        for r in rollouts
    )


def rollout(
    version_id: int, group: int, index: int, reward: float, *, dropped: bool = False
) -> Rollout:
    r = Rollout(
        task=spec(version_id),
        group=group,
        index_in_group=index,
        trajectory=AgentTrajectory.of([1], [AgentTurn(0, [5, 6], [0.0, 0.0], "", True)]),
        reward=reward,
    )
    if dropped:
        r.flags.append("infra_error")
    return r


def test_dropped_rollouts_get_no_advantage_and_their_task_is_replayed_first():
    specs = [spec(v) for v in (1, 2, 3, 4)]
    state = TrainerState(sampler=DifficultySampler(specs, lambda s: "medium", {}, 0), buckets={})
    batch = [
        rollout(1, 0, 0, 1.0),
        rollout(1, 0, 1, 0.0),
        rollout(2, 1, 0, 1.0),
        rollout(2, 1, 1, 0.0, dropped=True),
    ]
    batch[3].advantage = 123.0  # must stay untouched: a dropped rollout is not scored
    trained, zero_groups, groups = assign_advantages(batch, RunConfig())
    assert batch[3] not in trained and batch[3].advantage == 123.0
    # group 1 has one scored member left: no comparison, no advantage
    assert groups == 2 and zero_groups == 1 and trained == batch[:2]
    state.after_step(batch)
    assert state.replay == [2]
    chosen = state.next_tasks(specs, 2)
    assert chosen[0].task_version_id == 2 and len({c.task_version_id for c in chosen}) == 2
    assert state.replay == []


def test_trainer_state_round_trips_through_its_dict():
    specs = [spec(v) for v in (1, 2, 3, 4, 5)]
    first = TrainerState(
        sampler=DifficultySampler(specs, lambda s: "medium", {}, 7), buckets={1: "hard"}, replay=[3]
    )
    first.sampler.sample(2)
    saved = first.to_dict()
    second = TrainerState(sampler=DifficultySampler(specs, lambda s: "medium", {}, 99), buckets={})
    second.restore(saved)
    assert second.buckets == {1: "hard"} and second.replay == [3]
    assert [s.task_version_id for s in first.next_tasks(specs, 3)] == [
        s.task_version_id for s in second.next_tasks(specs, 3)
    ]


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_advantage_estimator_is_chosen_by_config(estimator):
    batch = [rollout(1, 0, i, r) for i, r in enumerate([1.0, 0.0, 0.0])]
    assign_advantages(batch, RunConfig(advantage_estimator=estimator, normalize_std=False))
    # mean 1/3: GRPO (mean only) 2/3, -1/3, -1/3; RLOO: 1 - 0 = 1, 0 - 1/2, 0 - 1/2
    expected = [2 / 3, -1 / 3, -1 / 3] if estimator == "grpo" else [1.0, -0.5, -0.5]
    assert [r.advantage for r in batch] == pytest.approx(expected)
