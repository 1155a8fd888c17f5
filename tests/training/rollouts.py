"""Rollouts and tasks the tests build by hand: a graded rollout with no turns (what a step
record stores when a test needs no turn), the ``add`` function task and a tiny default policy
for real rollouts of it."""

from __future__ import annotations

from sandboxes.result import OK
from training.agents.trajectory import AgentTrajectory
from training.policy import Policy, build_default_policy
from training.rollout import Rollout, TaskSpec

ADD_PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
ADD_BODY = "    return a + b\n"


def graded(task: TaskSpec, index: int, reward: float, **fields) -> Rollout:
    """Member ``index`` of group 0 of ``task``, graded ``ok`` with ``reward``, no turn."""
    return Rollout(
        task=task,
        group=0,
        index_in_group=index,
        trajectory=AgentTrajectory.of([1], []),
        status=fields.pop("status", OK),
        reward=reward,
        **fields,
    )


def add_task(version_id: int = 1, *, visible: str, hidden: str) -> TaskSpec:
    """The ``add`` function task with ``visible`` and ``hidden`` check suites."""
    return TaskSpec(
        task_version_id=version_id,
        prompt=ADD_PROMPT,
        entry_point="add",
        visible_tests=visible,
        hidden_tests=hidden,
        timeout_s=5,
    )


def tiny_policy() -> Policy:
    """A one-layer default policy whose tokenizer learned the ``add`` task."""
    return build_default_policy(
        [ADD_PROMPT + ADD_BODY] * 4, vocab_size=300, n_embd=32, n_layer=1, n_head=2, n_positions=512
    )
