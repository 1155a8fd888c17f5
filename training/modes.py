"""The rollout modes: what a training run does that depends on ``rollout_mode``.

A mode is the policy a run builds, the warm start it gives it, and the task kinds it trains
on. The rollouts themselves are the one loop of :mod:`training.rollout` in every mode; the
mode picks each task's environment there (``training.rollout.ROLLOUT_ENVIRONMENTS``).

- ``completion``: the small default policy (or a checkpoint, LoRA allowed) writes the program
  (:mod:`training.completion_run`); function tasks only;
- ``agent``: a policy with a chat template and tool-call format works through tools in a
  sandbox session (:mod:`training.agents.run`); every task kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tasks_library.models import TaskVersion
from tasks_library.task_spec import task_spec_of
from training import completion_run
from training.agents import run as agent_run
from training.config import RunConfig


@dataclass(frozen=True)
class RolloutMode:
    """What a run does under one ``rollout_mode``.

    Attributes:
        build_policy: ``(config, versions, device) -> policy``.
        warm_start: ``(policy, config, versions, on_epoch=...) -> SFT summary``
            (``sft/*`` keys; ``on_epoch(epoch, epochs, mean loss)`` after each epoch).
        kinds: the task kinds it trains on; None: every kind.
    """

    build_policy: Callable[[RunConfig, list[TaskVersion], torch.device], object]
    warm_start: Callable[..., dict]
    kinds: frozenset[str] | None = None

    def refused(self, versions: list[TaskVersion]) -> list[TaskVersion]:
        """The task versions this mode cannot train on."""
        if self.kinds is None:
            return []
        return [v for v in versions if _kind(v) not in self.kinds]


def _kind(version: TaskVersion) -> str:
    return version.kind


def _agent_policy(config: RunConfig, versions: list[TaskVersion], device: torch.device):
    return agent_run.build_policy(config, [task_spec_of(v) for v in versions], device)


def _agent_warm_start(policy, config: RunConfig, versions: list[TaskVersion], *, on_epoch=None):
    return agent_run.warm_start(
        policy, config, [task_spec_of(v) for v in versions], on_epoch=on_epoch
    )


def _completion_warm_start(
    policy, config: RunConfig, versions: list[TaskVersion], *, on_epoch=None
):
    return completion_run.sft_warm_start(policy, versions, config, on_epoch=on_epoch)


MODES: dict[str, RolloutMode] = {
    "completion": RolloutMode(
        completion_run.build_policy, _completion_warm_start, frozenset({"function"})
    ),
    "agent": RolloutMode(_agent_policy, _agent_warm_start),
}


def mode_of(config: RunConfig) -> RolloutMode:
    """The run's mode (``config.rollout_mode`` is checked against :data:`MODES` when the
    configuration is read)."""
    return MODES[config.rollout_mode]
