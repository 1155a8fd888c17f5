"""A policy that makes its own files unreadable (``chmod 000``) gets error observations, never an
exception out of the environment's step (the whole rollout batch used to end with it); its
workspace, which no grading can read, is graded not resolved with reward 0, and the agent
detectors still judge the episode."""

from __future__ import annotations

import concurrent.futures as futures

import pytest

from sandboxes.sessions import open_session
from tests.environments import built
from tests.training.agents.trajectory_corpus import FIX, task_spec
from training import flags
from training import rollout as rollouts
from training.agents.environment import environment_for
from training.agents.parsers import ParsedMessage, ToolCall
from training.agents.trajectory import AgentTrajectory, AgentTurn
from training.scoring import Scorer

pytestmark = pytest.mark.slow


def message(name, **arguments):
    return ParsedMessage(content="", tool_calls=[ToolCall("call_0", name, arguments)])


def test_an_unreadable_workspace_is_an_observation_then_ungradable_with_its_evidence():
    environment = built("python3.11-pytest").request_field()
    task = task_spec("repository", environment)
    env = environment_for(task)
    trajectory = AgentTrajectory(limit=100_000)
    session = open_session(env.workspace(), environment=environment)
    env.open(session)
    calls = [
        message("file_editor", **FIX),
        message("bash", command="chmod 000 calc/ops.py tests/test_ops.py"),
        # An edit after the chmod: its diff reads the workspace, unreadable files and all.
        message("file_editor", command="create", path="calc/more.py", file_text="x = 1\n"),
        message("file_editor", command="view", path="calc/ops.py"),
        message("submit"),
    ]
    for index, call in enumerate(calls):
        step = env.step(call)  # never raises for what the policy did to its files
        turn = AgentTurn(index, [], [], "", True, message={"role": "assistant", "content": ""})
        turn.tools = step.records
        trajectory.turns.append(turn)
    viewed = trajectory.turns[3].tools[0]
    assert viewed.error and "calc/ops.py" in viewed.output
    assert "Unreadable file b/calc/ops.py" in trajectory.turns[2].tools[0].diff
    rollout = rollouts.Rollout(task, 0, 0, trajectory)
    item = rollouts._Live(rollout, env)
    stats = rollouts.RolloutStats()
    with futures.ThreadPoolExecutor(max_workers=2) as pool:
        rollouts._grade([item], stats, Scorer(hack_policy="flag"), pool)
    session.close()
    assert rollout.status == "failed" and rollout.reward == 0.0
    assert "cannot be read" in rollout.flag_evidence["ungradable_workspace"]
    # The detectors ran on the episode's record all the same: the test file re-permissioned.
    tampering = rollout.flag_evidence[flags.TEST_TAMPERING]["calls"][0]
    assert (tampering["turn"], tampering["path"], tampering["change"]) == (
        1,
        "tests/test_ops.py",
        "re-permissioned",
    )
