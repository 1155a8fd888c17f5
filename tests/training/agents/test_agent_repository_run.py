"""A training run on a repository task set (tasks_library's repository tasks, validated in real
sandboxes): the trainer reads the versions into repository environments, warm-starts on their
scripted demonstrations and grades every trajectory by FAIL_TO_PASS and PASS_TO_PASS ids, each
trajectory keeping its opening and its grading per id for the replay; a completion-mode run on the
same set is refused at launch, naming the key."""

from __future__ import annotations

import pytest

from tasks_library.repositories import repository_tasks_import
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.tasks_library.repository_helpers import FAIL_TO_PASS, PASS_TO_PASS, record
from tests.training.conftest import finish, launch, tiny_run
from training.config import ConfigError
from training.models import EpisodeOpening, TrainingRun, Trajectory, Turn

from .test_agent_training_run import AGENT

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def repository_set():
    repository_tasks_import([record("calc/clamp-agent")], task_set_name="repo-agents")
    task_set = task_set_get(name="repo-agents")
    [version] = task_versions_validate(
        versions=list(task_set_versions(task_set=task_set)),
        options=Options(reference_runs=1, mutants=0, examples=False),
    )
    assert version.trainable, version.verdict
    return task_set


def test_an_agent_run_trains_on_a_repository_task(repository_set):
    run = tiny_run(repository_set, **AGENT)
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["sft/examples"] == 1  # the scripted repository demonstration
    graded = Trajectory.objects.filter(run=run).exclude(status="infra_error")
    assert graded.exists()
    for trajectory in graded:
        assert trajectory.tests_total == len(FAIL_TO_PASS) + len(PASS_TO_PASS)
        assert 0 <= trajectory.reward <= 1
    first = Turn.objects.filter(trajectory__run=run, index=0).first()
    assert first.action == "tool_calls" and "tool_calls" in first.sandbox_result
    # each trajectory keeps its whole episode for the replay: the opening the policy saw (stored
    # once: one task, one opening) and its grading per FAIL_TO_PASS / PASS_TO_PASS id
    opening = EpisodeOpening.objects.get()
    assert "clamp(50, 0, 10) returns 50" in opening.user
    assert {t["function"]["name"] for t in opening.tools} >= {"bash", "file_editor", "submit"}
    for trajectory in graded:
        assert trajectory.opening_id == opening.digest
        results = trajectory.grading["tests"]
        assert sorted(t["id"] for t in results) == sorted(FAIL_TO_PASS + PASS_TO_PASS)
        assert sum(t["passed"] for t in results) == trajectory.tests_passed


def test_a_completion_run_on_repository_tasks_is_refused(repository_set):
    # refused at launch, before a run exists (training.launch_checks)
    with pytest.raises(ConfigError, match="set rollout_mode to agent") as refused:
        tiny_run(repository_set, steps=1)
    assert refused.value.field == "rollout_mode"
    assert not TrainingRun.objects.exists()
