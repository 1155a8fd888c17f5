"""A run that trains less than asked says so: a step that trained no token and a step whose
groups carried no advantage raise warnings on the run, extended step after step, sent to its
page (live and in the back-fill) and to the runs table; a resume recounts them; tasks dropped for
their prompt length are named with their lengths (the run that once "succeeded" having trained
nothing said nothing)."""

from __future__ import annotations

import pytest

from tests.training.conftest import one_task_run
from tests.training.test_step_record_nul_text import rollout_with_nul
from training import run_warnings, selectors, services
from training.models import RunWarning

pytestmark = pytest.mark.django_db

NOTHING = {"tokens/trained": 0, "groups/zero_advantage": 3, "groups/total": 3}
HALF = {"tokens/trained": 120, "groups/zero_advantage": 2, "groups/total": 4}
FINE = {"tokens/trained": 640, "groups/zero_advantage": 1, "groups/total": 4}


def test_the_rules():
    assert [w["kind"] for w in run_warnings.step_warnings(1, NOTHING)] == [
        run_warnings.NO_TOKENS_TRAINED,
        run_warnings.ZERO_ADVANTAGE,
    ]
    assert [w["kind"] for w in run_warnings.step_warnings(2, HALF)] == [run_warnings.ZERO_ADVANTAGE]
    assert run_warnings.step_warnings(3, FINE) == []
    assert run_warnings.step_warnings(4, {}) == []  # counts not reported: nothing said
    assert run_warnings.tasks_dropped_warning([], limit=320, kept=3) is None


def record(run, step: int, metrics: dict):
    version_id = run.task_versions.get().pk
    return services.step_record(
        run_id=run.pk, step=step, rollouts=[rollout_with_nul(version_id)], metrics=metrics
    )


def test_steps_raise_and_extend_warnings_and_a_resume_recounts_them():
    run = one_task_run()
    record(run, 1, NOTHING)
    record(run, 2, FINE)
    record(run, 3, NOTHING)
    record(run, 4, HALF)
    none = RunWarning.objects.get(run=run, kind=run_warnings.NO_TOKENS_TRAINED)
    assert (none.first_step, none.last_step, none.steps) == (1, 3, 2)
    assert sorted(none.details["steps"], key=int) == ["1", "3"]
    assert "No token was trained at 2 step(s), the newest step 3" in none.message
    zero = RunWarning.objects.get(run=run, kind=run_warnings.ZERO_ADVANTAGE)
    assert (zero.first_step, zero.last_step, zero.steps) == (1, 4, 3)
    assert zero.details["steps"]["4"] == {"zero": 2, "groups": 4}
    assert "step 4: 2 of 4 groups" in zero.message

    events = selectors.run_backfill_bounded(run_id=run.pk, after=0)
    shown = {e["warning"]: e for e in events if e["kind"] == "warning"}
    assert shown[run_warnings.NO_TOKENS_TRAINED]["title"] == "no token trained"
    assert shown[run_warnings.ZERO_ADVANTAGE]["steps"] == 3
    row = selectors.run_row_event(run)
    assert row["steps_done"] == 4 and len(row["warnings"]) == 2

    services.run_rewind(run_id=run.pk, to_step=2)  # steps 3 and 4 are trained again
    none = RunWarning.objects.get(run=run, kind=run_warnings.NO_TOKENS_TRAINED)
    assert (none.first_step, none.last_step, none.steps) == (1, 1, 1)
    zero = RunWarning.objects.get(run=run, kind=run_warnings.ZERO_ADVANTAGE)
    assert zero.steps == 1


def test_dropped_tasks_are_named_with_their_lengths():
    run = one_task_run()
    dropped = [
        {"task_id": "cachetools/lru-1", "version": 1, "tokens": 512},
        {"task_id": "cachetools/ttl-2", "version": 1, "tokens": 401},
    ]
    warning = run_warnings.tasks_dropped_warning(dropped, limit=320, kept=1)
    services.run_warning_raise(run_id=run.pk, **warning)
    stored = RunWarning.objects.get(run=run)
    assert stored.first_step is None and stored.details["tasks"] == dropped
    assert "2 task(s) left out of training" in stored.message
    assert "max_prompt_tokens=320 (the longest 512 tokens)" in stored.message
    assert "cachetools/lru-1 (512 tokens), cachetools/ttl-2 (401 tokens)" in stored.message
    assert "trains on the 1 that fit" in stored.message
    # raised again on a resume's setup: one row, replaced
    services.run_warning_raise(run_id=run.pk, **warning)
    assert RunWarning.objects.filter(run=run).count() == 1
