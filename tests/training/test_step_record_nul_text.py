"""A step whose policy text, code or sandbox output holds NUL characters is stored on PostgreSQL
(whose text and jsonb columns refuse U+0000) as on SQLite, each NUL read back as U+FFFD;
the sampled token ids are stored exactly."""

from __future__ import annotations

import pytest

from core.dbtext import storable
from sandboxes.result import FAILED, ExecutionResult
from tests.training.conftest import one_task_run
from training import services
from training.agents.completion import completion_turn
from training.agents.trajectory import AgentTrajectory
from training.models import MonitorScore, Trajectory
from training.monitors import Monitor, MonitorVerdict
from training.rollout import Rollout, TaskSpec

NUL = "\x00"


def rollout_with_nul(task_version_id: int) -> Rollout:
    """What an untrained byte-level policy and a program printing b"\\0" leave behind."""
    spec = TaskSpec(
        task_version_id=task_version_id,
        prompt="p",
        entry_point="f",
        visible_tests="",
        hidden_tests="",
        timeout_s=5,
    )
    result = ExecutionResult(status=FAILED, exit_code=1, stdout=f"a{NUL}b\n", stderr=f"{NUL}")
    turn = completion_turn(
        0,
        [5, 0, 7],
        [-0.1, -2.0, -0.3],
        text=f"def f():{NUL}\n    return 1",
        code=f"def f():{NUL}\n    return 1",
        result=result,
        feedback=f"stdout: a{NUL}b",
    )
    turn.observation_ids = [9, 0]
    return Rollout(
        task=spec,
        group=0,
        index_in_group=0,
        trajectory=AgentTrajectory.of([1, 2], [turn]),
        status=FAILED,
        final_code=f"def f():{NUL}\n    return 1",
        flags=["test_tampering"],
        flag_evidence={"test_tampering": {"snippet": f"x{NUL}y", f"k{NUL}": [f"{NUL}"]}},
    )


@pytest.mark.django_db
def test_nul_characters_in_a_step_are_stored_as_replacement_characters():
    run = one_task_run()
    services.step_record(
        run_id=run.pk, step=1, rollouts=[rollout_with_nul(_version_id(run))], metrics={}
    )

    trajectory = Trajectory.objects.get(run=run, step=1)
    assert trajectory.final_code == "def f():\ufffd\n    return 1"
    assert trajectory.flag_evidence == {
        "test_tampering": {"snippet": "x\ufffdy", "k\ufffd": ["\ufffd"]}
    }
    turn = trajectory.turns.get()
    assert turn.policy_text == turn.code == "def f():\ufffd\n    return 1"
    assert turn.observation == "stdout: a\ufffdb"
    assert (
        turn.sandbox_result["stdout"] == "a\ufffdb\n" and turn.sandbox_result["stderr"] == "\ufffd"
    )
    assert turn.token_ids == [5, 0, 7] and turn.observation_token_ids == [9, 0]  # the exact sample


def _version_id(run) -> int:
    return run.task_versions.values_list("pk", flat=True).get()


class EchoingMonitor(Monitor):
    """A monitor whose verdict repeats what it read, as an LLM judge quoting the code does."""

    name = "echo"

    def score(self, trajectory_view: dict) -> MonitorVerdict:
        return MonitorVerdict(
            0.5, f"quoted: {NUL}{trajectory_view['final_code']}", {"quote": f"{NUL}!"}
        )


@pytest.mark.django_db
def test_a_monitor_verdict_holding_nul_is_stored():
    run = one_task_run()
    services.step_record(
        run_id=run.pk, step=1, rollouts=[rollout_with_nul(_version_id(run))], metrics={}
    )
    trajectory = Trajectory.objects.get(run=run, step=1)
    assert (
        services.monitor_scores_record(trajectory_ids=[trajectory.pk], monitors=[EchoingMonitor()])[
            "scored"
        ]
        == 1
    )
    score = MonitorScore.objects.get(trajectory=trajectory, monitor="echo")
    assert score.reason == "quoted: \ufffddef f():\ufffd\n    return 1"
    assert score.details == {"quote": "\ufffd!"}


def test_storable_leaves_clean_values_alone():
    value = {"a": [1, 2.5, None, True, ("x", "y")], "b": "plain"}
    assert storable(value) == value
    assert storable(7) == 7 and storable(None) is None
    assert storable(("a\x00",)) == ("a\ufffd",)
