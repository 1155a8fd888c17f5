"""What a training run does under ``rollout_mode="agent"`` (through :mod:`training.modes`).

- the policy: a checkpoint from ``model_path`` loaded with its own chat template
  (:func:`~training.agents.policy.load_agent_policy`), or the default local policy built
  with the ChatML tool template, its tokenizer trained on the tasks' rendered openings,
  prompts and reference solutions;
- the warm start: SFT on demonstrations, scripted from each task's reference through its
  environment in real sessions, or read from ``sft_data`` (the JSONL format of
  :mod:`training.agents.demonstrations`), rendered in the policy's template with the
  rollouts' masks.

The rollouts are the one loop of :mod:`training.rollout`, whose environment under this mode is
the task family's (:func:`~training.agents.environment.environment_for`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tasks_library.task_spec import TaskSpec
from training.agents.chat import chatml_text
from training.agents.demonstrations import (
    Demonstration,
    flawed_function_demonstrations,
    load_demonstrations,
    render,
    scripted_function_demonstration,
    scripted_repository_demonstration,
    scripted_terminal_demonstration,
)
from training.agents.environment import (
    FunctionTaskEnvironment,
    RepositoryEnvironment,
    TerminalEnvironment,
    environment_for,
)
from training.agents.policy import AgentPolicy, build_agent_policy, load_agent_policy
from training.algorithms.sft import sft_settings, sft_train

DEFAULT_CONTEXT = 2048  # the default local policy's context length, in tokens


def corpus(tasks: list[TaskSpec]) -> list[str]:
    """Texts the default policy's tokenizer learns merges from: each task's opening as the
    template renders it (system prompt, tool schemas, user prompt), a scripted call of each
    tool, its prompt and its reference."""
    texts = []
    for task in tasks:
        opening = environment_for(task).opening()
        calls = [
            {"name": "file_editor", "arguments": {"command": "view", "path": "solution.py"}},
            {"name": "run_tests", "arguments": {}},
            {"name": "bash", "arguments": {"command": "ls -la"}},
            {"name": "submit", "arguments": {}},
        ]
        messages = [
            *opening.messages(),
            *(
                {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
                for call in calls
            ),
        ]
        texts.append(chatml_text(messages, opening.tools))
        texts.append(task.prompt + task.reference_solution)
        texts.append(json.dumps({"new_str": task.reference_solution}))
    return texts


def build_policy(config, tasks: list[TaskSpec], device: torch.device) -> AgentPolicy:
    """The run's agent policy: ``model_path`` loaded as it is, or the default local one."""
    if config.model_path:
        return load_agent_policy(Path(config.model_path), device=device, dtype=torch.float32)
    return build_agent_policy(
        corpus(tasks),
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_positions=DEFAULT_CONTEXT,
        seed=config.seed,
        device=device,
    )


def demonstrations(config, tasks: list[TaskSpec]) -> list[Demonstration]:
    """The warm start's demonstrations: ``sft_data`` read as agent JSONL, or one scripted
    from each task's reference (recorded in a real session), with ``flawed_demonstrations``
    flawed ones of each task beside it."""
    if config.sft_data:
        return load_demonstrations(Path(config.sft_data))
    out = []
    for task in tasks:
        if not task.reference_solution:
            continue
        if task.kind == RepositoryEnvironment.kind:
            out.append(scripted_repository_demonstration(RepositoryEnvironment(task)))
            continue
        if task.kind == TerminalEnvironment.kind:
            out.append(scripted_terminal_demonstration(TerminalEnvironment(task)))
            continue
        out.append(scripted_function_demonstration(FunctionTaskEnvironment(task)))
        if config.flawed_demonstrations:
            out += flawed_function_demonstrations(
                lambda task=task: FunctionTaskEnvironment(task),
                count=config.flawed_demonstrations,
            )
    return out


def warm_start(policy: AgentPolicy, config, tasks: list[TaskSpec], *, on_epoch=None) -> dict:
    """SFT on :func:`demonstrations` rendered in the policy's template; demonstrations longer
    than the context are left out (counted in ``sft/too_long``)."""
    rendered = [render(policy.chat, demo) for demo in demonstrations(config, tasks)]
    limit = min(policy.n_positions, config.max_tokens or policy.n_positions)
    examples = [pair for pair in rendered if len(pair[0]) <= limit]
    summary = sft_train(
        policy,
        examples,
        **sft_settings(config),
        on_epoch=on_epoch,
    )
    summary["sft/too_long"] = len(rendered) - len(examples)
    return summary
