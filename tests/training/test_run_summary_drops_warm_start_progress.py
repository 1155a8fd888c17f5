"""A run's summary keeps the warm start's progress only while the warm start is what the run is
doing: the first recorded step retires it (its figures kept as ``warm_start``), and so does the
run's end (a succeeded run once said phase "sft" in its summary and the API)."""

import pytest
from rest_framework.test import APIClient

from tests.training.conftest import one_task_run
from tests.training.test_step_record_nul_text import rollout_with_nul
from training import services
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


def summary(run_id: int) -> dict:
    return TrainingRun.objects.get(pk=run_id).summary


def test_steps_and_the_end_remove_the_warm_start_progress():
    run = one_task_run()
    services.run_transition(run_id=run.pk, to_status=TrainingRun.LAUNCHING)
    services.run_transition(run_id=run.pk, to_status=TrainingRun.RUNNING)
    services.run_progress_record(run_id=run.pk, phase="sft", done=40, total=40, detail="loss 0.1")
    services.run_summary_update(run_id=run.pk, **{"sft/examples": 1})
    assert summary(run.pk)["progress"]["phase"] == "sft"
    version_id = run.task_versions.get().pk
    services.step_record(run_id=run.pk, step=1, rollouts=[rollout_with_nul(version_id)], metrics={})
    assert "progress" not in summary(run.pk) and summary(run.pk)["sft/examples"] == 1
    assert summary(run.pk)["warm_start"]["epochs_done"] == 40  # its figures, as a past phase

    # a run that ends during its warm start (cancelled) keeps no phase either
    other = one_task_run()
    services.run_transition(run_id=other.pk, to_status=TrainingRun.LAUNCHING)
    services.run_transition(run_id=other.pk, to_status=TrainingRun.RUNNING)
    services.run_progress_record(run_id=other.pk, phase="sft", done=3, total=40)
    services.run_transition(run_id=other.pk, to_status=TrainingRun.CANCELLED, reason="stop")
    assert "progress" not in summary(other.pk)
    services.run_transition(run_id=run.pk, to_status=TrainingRun.SUCCEEDED)
    for run_id in (run.pk, other.pk):
        row = APIClient().get(f"/api/runs/{run_id}/").json()
        assert '"phase": "sft"' not in str(row.get("summary", "")).replace("'", '"')
