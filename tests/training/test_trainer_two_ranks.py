"""The whole trainer under torchrun with two CPU ranks (gloo): groups are sharded across the
ranks, rank 0 records every group of every step once, and the run ends succeeded."""

import pytest

from tests.training.conftest import finish, launch, tiny_run
from training.models import StepMetric, TrainingRun, Trajectory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_two_ranks_train_and_record_every_group_once(trained_task_set):
    run = tiny_run(trained_task_set, steps=2, nproc_per_node=2, tasks_per_step=3)
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["ranks"] == 2
    assert "2 rank(s)" in run.transitions.get(to_status="running").reason
    assert [s.step for s in StepMetric.objects.filter(run=run).order_by("step")] == [1, 2]
    for step in (1, 2):
        rows = list(
            Trajectory.objects.filter(run=run, step=step).values_list("group", "index_in_group")
        )
        # 3 groups of 2, sharded 2 + 1 over the ranks, gathered and written once by rank 0
        assert sorted(rows) == [(g, i) for g in range(3) for i in range(2)]
    # the two ranks sampled with different generators: their shares are not copies
    step1 = Trajectory.objects.filter(run=run, step=1).prefetch_related("turns")
    assert len({tuple(t.turns.all()[0].token_ids) for t in step1}) > 1
