"""A training run with rollout_mode="agent" end to end, in a real trainer process: SFT on
scripted demonstrations, GRPO steps over multi-turn tool-using rollouts, trajectories and their
tool calls recorded; the default local policy and a Qwen2 checkpoint take the same path."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from tasks_library.selectors import task_set_versions
from tasks_library.services import task_set_pin
from tests.training.conftest import finish, launch, tiny_run
from training.config import ConfigError, RunConfig
from training.models import HeldOutEvaluation, StepMetric, TrainingRun, Trajectory, Turn

from .checkpoints import qwen2_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENT = {
    "rollout_mode": "agent",
    "steps": 2,
    "max_turns": 3,
    "max_new_tokens": 48,
    "sft_epochs": 2,
    "sft_batch_size": 4,
}


def check_run(run: TrainingRun, output: str, *, sft_examples: int = 3) -> None:
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, output
    metrics = list(StepMetric.objects.filter(run=run).order_by("step"))
    assert [m.step for m in metrics] == [1, 2]
    for metric in metrics:
        assert metric.metrics["agent/turns_mean"] >= 1
        assert "agent/tool_hidden_share" in metric.metrics
        assert metric.metrics["groups/total"] >= 1 and "loss/policy" in metric.metrics
    turns = Turn.objects.filter(trajectory__run=run)
    assert turns.exists()
    for turn in turns[:20]:
        assert turn.token_ids and len(turn.token_ids) == len(turn.logprobs)
        assert "tool_calls" in turn.sandbox_result and "message" in turn.sandbox_result
    assert run.summary["sft/examples"] == sft_examples


def test_the_default_policy_trains_as_an_agent(trained_task_set):
    # one task held out: the held-out evaluation rolls agents out on it after step 2
    held_out = list(task_set_versions(task_set=trained_task_set))[-1:]
    task_set_pin(name="agent-heldout", versions=held_out, description="held out")
    run = tiny_run(
        trained_task_set,
        **AGENT,
        fresh_tests=3,
        eval_task_set="agent-heldout",
        eval_every=2,
        eval_samples=2,
    )
    check_run(run, finish(launch(run)), sft_examples=2)
    [evaluation] = HeldOutEvaluation.objects.filter(run=run)
    assert (evaluation.step, evaluation.tasks, evaluation.samples_per_task) == (2, 1, 2)
    assert "pass@1" in evaluation.pass_at_k and 0 <= evaluation.reward_mean <= 1
    # each grading drew fresh inputs (fresh_tests), recorded with the trajectory
    graded = list(Trajectory.objects.filter(run=run, status__in=("ok", "failed")))
    assert graded and all(t.fresh_tests["seed"] >= 0 for t in graded)
    drawn = [t for t in graded if t.fresh_tests["inputs"]]
    assert drawn
    for t in drawn:
        fixed = len(t.task_version.test_suite.hidden_test_ids)
        assert t.tests_total == fixed + len(t.fresh_tests["inputs"])


def test_a_qwen2_checkpoint_trains_through_the_same_path(trained_task_set, settings):
    # model_path names a directory under CRUCIBLE_MODEL_DIR (the trainer process checks it too).
    directory = qwen2_checkpoint(Path(settings.MODEL_DIR) / f"qwen2-{uuid.uuid4().hex[:8]}")
    try:
        run = tiny_run(trained_task_set, **AGENT, model_path=directory.name)
        check_run(run, finish(launch(run)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_lora_with_agents_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="'lora' is not available with rollout_mode 'agent'"):
        RunConfig.from_dict({"rollout_mode": "agent", "lora": {"r": 4}})
