"""Migration 0009 turns the JSON token ids and log-probs of existing turns into packed arrays,
values unchanged, and back again when reversed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.training.conftest import one_task_run

BEFORE = [("training", "0008_trajectory_opening_grading")]
AFTER = [("training", "0009_packed_turn_arrays")]
LATEST = None


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor.loader.project_state(targets).apps if targets else None


@pytest.mark.django_db(transaction=True)
def test_existing_turns_keep_their_ids_and_logprobs_through_the_migration():
    run = one_task_run()
    version_id = run.task_versions.values_list("pk", flat=True).get()
    old = _migrate(BEFORE)
    Trajectory = old.get_model("training", "Trajectory")
    Turn = old.get_model("training", "Turn")
    trajectory = Trajectory.objects.create(
        run_id=run.pk, step=0, group=0, index_in_group=0, task_version_id=version_id, reward=1.0
    )
    Turn.objects.create(
        trajectory=trajectory,
        index=0,
        policy_text="t",
        token_ids=[1, 0, 151_935],
        logprobs=[-0.5, -1e-9],
        observation_token_ids=list(range(1500)),
    )
    Turn.objects.create(trajectory=trajectory, index=1, policy_text="u")  # empty arrays

    new = _migrate(AFTER)
    turns = new.get_model("training", "Turn").objects.order_by("index")
    assert [(t.token_ids, t.logprobs, t.observation_token_ids[-1]) for t in turns[:1]] == [
        ([1, 0, 151_935], [-0.5, -1e-9], 1499)
    ]
    assert (turns[1].token_ids, turns[1].logprobs, turns[1].observation_token_ids) == ([], [], [])

    back = _migrate(BEFORE)
    turn = back.get_model("training", "Turn").objects.get(index=0)
    assert turn.token_ids == [1, 0, 151_935] and turn.logprobs == [-0.5, -1e-9]
    _migrate(LATEST)
