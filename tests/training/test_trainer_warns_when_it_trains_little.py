"""A real trainer that drops tasks for their prompt length and trains no token says so (a run
once "succeeded" on 1 of 3 tasks with every group at zero advantage and nothing trained, and
said nothing): the dropped tasks are named with their lengths before the first step, and every
step whose metrics show no token trained, or groups without advantage, is in a warning; the
runs API lists them."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks_library.selectors import task_set_versions
from tests.training.conftest import finish, launch, tiny_run
from training import run_warnings
from training.models import RunWarning, StepMetric, TrainingRun
from training.policy import train_tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_dropped_tasks_and_untrained_steps_are_warned(trained_task_set):
    versions = sorted(
        task_set_versions(task_set=trained_task_set), key=lambda v: v.task.task_id
    )  # the trainer's order
    # the default policy's tokenizer, as the trainer trains it on these tasks
    tokenizer = train_tokenizer([v.prompt + v.reference_solution for v in versions])
    lengths = {v.task.task_id: len(tokenizer.encode(v.prompt).ids) for v in versions}
    limit = min(lengths.values())  # the shortest prompt fits, the two others do not
    run = tiny_run(trained_task_set, steps=2, max_prompt_tokens=limit)
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out

    dropped = RunWarning.objects.get(run=run, kind=run_warnings.TASKS_DROPPED)
    assert dropped.first_step is None and dropped.details["limit"] == limit
    assert dropped.details["kept"] == 1
    assert {d["task_id"]: d["tokens"] for d in dropped.details["tasks"]} == {
        task: n for task, n in lengths.items() if n > limit
    }
    steps = {s.step: s.metrics for s in StepMetric.objects.filter(run=run)}
    assert sorted(steps) == [1, 2]
    untrained = [s for s, m in steps.items() if m["tokens/trained"] == 0]
    idle = [s for s, m in steps.items() if m["groups/zero_advantage"] >= 0.5 * m["groups/total"]]
    # the seeded tiny policy earns equal rewards in its one group: the case the warnings are for
    assert untrained and idle
    for kind, expected in (
        (run_warnings.NO_TOKENS_TRAINED, untrained),
        (run_warnings.ZERO_ADVANTAGE, idle),
    ):
        found = RunWarning.objects.filter(run=run, kind=kind).first()
        assert sorted(map(int, found.details["steps"]) if found else []) == expected, kind
    api = APIClient()
    row = api.get(f"/api/runs/{run.pk}/").json()
    assert {w["kind"] for w in row["warnings"]} == set(
        RunWarning.objects.filter(run=run).values_list("kind", flat=True)
    )
    assert "summary" not in row or "progress" not in (row.get("summary") or {})
