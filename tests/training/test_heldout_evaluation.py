"""Held-out evaluation: a run names a task set it never trains on and records pass@k on it
every ``eval_every`` steps beside the training reward."""

import pytest

from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.training.conftest import TINY, finish, launch
from training import services
from training.config import RunConfig
from training.heldout import evaluation_ks
from training.models import HeldOutEvaluation, TrainingRun, Trajectory


def _import(rows, name):
    tasks_import(
        source="humaneval",
        task_set_name=name,
        records=[
            {
                "task_id": r["task_id"],
                "prompt": r["prompt"],
                "entry_point": r["entry_point"],
                "reference_solution": r["canonical_solution"],
                "tests": r["test"],
                "where": "test",
            }
            for r in rows
        ],
    )
    task_set = task_set_get(name=name)
    task_versions_validate(
        versions=list(task_set_versions(task_set=task_set)),
        options=Options(reference_runs=1, mutants=0),
    )
    return task_set


def test_reported_ks():
    assert evaluation_ks(1) == [1]
    assert evaluation_ks(4) == [1, 4]
    assert evaluation_ks(12) == [1, 5, 10, 12]


@pytest.mark.django_db
def test_run_create_refuses_a_bad_heldout_set(humaneval):
    train = _import(humaneval[:2], "train")
    with pytest.raises(ValueError, match="no task set named 'nope'"):
        services.run_create(task_set=train, config=RunConfig(eval_task_set="nope", eval_every=1))
    with pytest.raises(ValueError, match="nothing is left to train on"):
        services.run_create(task_set=train, config=RunConfig(eval_task_set="train", eval_every=1))
    with pytest.raises(Exception, match="eval_task_set"):
        RunConfig.from_dict({"eval_every": 2})


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_run_evaluates_on_the_heldout_set_and_never_trains_on_it(humaneval):
    train = _import(humaneval[:4], "train")
    _import(humaneval[2:5], "heldout")  # shares HumanEval/2 and /3 with the training set
    run = services.run_create(
        task_set=train,
        config=RunConfig.from_dict(
            {**TINY, "steps": 2, "eval_task_set": "heldout", "eval_every": 1, "eval_samples": 2}
        ),
    )
    heldout_tasks = {"HumanEval/2", "HumanEval/3", "HumanEval/4"}
    assert {v.task.task_id for v in run.task_versions.all()} == {"HumanEval/0", "HumanEval/1"}
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    evaluations = list(HeldOutEvaluation.objects.filter(run=run).order_by("step"))
    assert [e.step for e in evaluations] == [1, 2]
    for evaluation in evaluations:
        assert evaluation.tasks == 3 and evaluation.samples_per_task == 2
        assert set(evaluation.pass_at_k) == {"pass@1", "pass@2"}
        assert 0.0 <= evaluation.pass_at_k["pass@1"] <= evaluation.pass_at_k["pass@2"] <= 1.0
        assert 0.0 <= evaluation.reward_mean <= 1.0
    trained_on = set(
        Trajectory.objects.filter(run=run).values_list("task_version__task__task_id", flat=True)
    )
    assert trained_on and not trained_on & heldout_tasks
