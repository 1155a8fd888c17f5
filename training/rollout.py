"""Multi-turn rollouts: write code, run the visible tests, observe, revise; then grade.

Token in, token out: a trajectory's training sequence is built only by
concatenating ids, never by re-tokenizing text. It is

    [bos] + prompt ids + (sampled ids + observation ids) * turns

and the loss mask is 1 exactly on the sampled ids. Observation ids (sandbox output
and the re-shown prompt) are context the policy did not choose, so they are masked.

Grading runs the final code against the hidden tests in a fresh sandbox; the
agent's turns only ever saw the visible tests. A sandbox ``infra_error`` is retried
once, then the trajectory is flagged ``infra_error`` and dropped from the batch:
it gets no reward, not a reward of 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.suites import harness
from sandboxes.process import Limits
from training.generation import sample_batch
from training.policy import Policy

OBSERVATION_TEXT_TOKENS = 48


@dataclass(frozen=True)
class TaskSpec:
    """What a rollout needs of a task version, detached from the database."""

    task_version_id: int
    prompt: str
    entry_point: str
    visible_tests: str
    hidden_tests: str
    timeout_s: float
    harness: str = "python-check"  # the test suite's harness: which runtime runs the code
    files: dict = field(default_factory=dict)  # workspace files beside the program
    test_timeout_s: float | None = None  # per-test limit of the suite, if any


@dataclass
class TurnRecord:
    policy_text: str
    token_ids: list[int]
    logprobs: list[float]
    code: str
    sandbox_status: str = ""
    sandbox_result: dict = field(default_factory=dict)
    observation: str = ""
    observation_ids: list[int] = field(default_factory=list)


@dataclass
class Rollout:
    task: TaskSpec
    group: int
    index_in_group: int
    prompt_ids: list[int]
    turns: list[TurnRecord] = field(default_factory=list)
    done: bool = False
    final_code: str = ""
    status: str = ""
    reward: float = 0.0
    tests_passed: int = 0
    tests_total: int = 0
    flags: list[str] = field(default_factory=list)
    advantage: float = 0.0

    @property
    def dropped(self) -> bool:
        """Dropped trajectories (infrastructure failures) are neither scored nor trained on."""
        return "infra_error" in self.flags

    @property
    def passed(self) -> bool:
        """Every hidden test passed (a suite with no test never passes)."""
        return self.tests_total > 0 and self.tests_passed == self.tests_total

    def context_ids(self) -> list[int]:
        ids = list(self.prompt_ids)
        for turn in self.turns:
            ids += turn.token_ids + turn.observation_ids
        return ids

    def sequence_and_mask(self) -> tuple[list[int], list[int]]:
        """The trained sequence and its loss mask (1 on sampled ids only)."""
        ids, mask = list(self.prompt_ids), [0] * len(self.prompt_ids)
        for turn in self.turns:
            ids += turn.token_ids + turn.observation_ids
            mask += [1] * len(turn.token_ids) + [0] * len(turn.observation_ids)
        return ids, mask


@dataclass
class RolloutConfig:
    group_size: int = 8
    max_turns: int = 2
    max_new_tokens: int = 96
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass
class RolloutTimes:
    generation_s: float = 0.0
    sandbox_s: float = 0.0
    grading_s: float = 0.0
    generated_tokens: int = 0


def _limits(task: TaskSpec) -> Limits:
    return Limits(wall_timeout_s=task.timeout_s, cpu_s=int(task.timeout_s) + 1, test_timeout_s=task.test_timeout_s)


def _execute(items: list[tuple[str, str, TaskSpec]]) -> list[R.ExecutionResult]:
    """Run ``(code, tests, task)`` items on the sandbox workers, all queued at once.

    A worker that dies under a request is replaced and the request retried once on
    another; what still fails comes back ``infra_error`` and is flagged, not scored.
    """
    return run_many([harness(task.harness).request(code, tests, task.entry_point, prompt=task.prompt, limits=_limits(task),
                                                     files=task.files)
                     for code, tests, task in items])


def observation_text(result: R.ExecutionResult) -> str:
    """What the policy is shown after running its code on the visible tests."""
    lines = [f"\n# sandbox: {result.status}, visible tests passed {result.tests_passed}/{result.tests_total}"]
    for test in result.tests:
        if not test.passed:
            lines.append(f"# {test.id} failed: {test.error[:120]}")
    if result.stderr.strip():
        lines.append("# stderr: " + result.stderr.strip().splitlines()[-1][:160])
    return "\n".join(lines) + "\n# revise:\n"


def collect_rollouts(
    policy: Policy,
    tasks: list[TaskSpec],
    config: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
) -> tuple[list[Rollout], RolloutTimes]:
    """Roll out ``config.group_size`` trajectories per task, then grade them.

    Generation is batched over every active trajectory of every group; the sandbox
    executions of a turn are queued together and run concurrently on the workers.

    Returns:
        ``(rollouts, times)``: rollouts ordered by group then index, each graded
        (or flagged ``infra_error``); times in seconds per phase.
    """
    times = RolloutTimes()
    rollouts = [
        Rollout(task=task, group=g, index_in_group=i, prompt_ids=[policy.bos_id, *policy.encode(task.prompt)])
        for g, task in enumerate(tasks)
        for i in range(config.group_size)
    ]
    n_positions = policy.model.config.n_positions
    for turn_index in range(config.max_turns):
        active = [r for r in rollouts if not r.done]
        if not active:
            break
        started = time.monotonic()
        samples = sample_batch(
            policy,
            [r.context_ids() for r in active],
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            stop_ids=(policy.end_id,),
            generator=generator,
        )
        times.generation_s += time.monotonic() - started
        for rollout, sample in zip(active, samples):
            text = policy.decode(sample.token_ids)
            times.generated_tokens += len(sample.token_ids)
            rollout.turns.append(
                TurnRecord(policy_text=text, token_ids=sample.token_ids, logprobs=sample.logprobs, code=rollout.task.prompt + text)
            )
        started = time.monotonic()
        results = _execute([(r.turns[-1].code, r.task.visible_tests, r.task) for r in active])
        times.sandbox_s += time.monotonic() - started
        last_turn = turn_index == config.max_turns - 1
        for rollout, result in zip(active, results):
            turn = rollout.turns[-1]
            turn.sandbox_status, turn.sandbox_result = result.status, result.to_dict()
            if result.status == R.INFRA_ERROR:
                rollout.flags.append("infra_error")
                rollout.done = True
                continue
            if result.passed or last_turn:
                rollout.done = True
                continue
            turn.observation = observation_text(result)
            feedback = policy.encode(turn.observation)[:OBSERVATION_TEXT_TOKENS]
            turn.observation_ids = [policy.obs_id, *feedback, *policy.encode(rollout.task.prompt)]
            if len(rollout.context_ids()) + config.max_new_tokens > n_positions:
                # No room for another turn: the last code stands as the answer.
                turn.observation, turn.observation_ids = "", []
                rollout.done = True

    started = time.monotonic()
    to_grade = [r for r in rollouts if not r.dropped]
    for rollout in to_grade:
        rollout.final_code = rollout.turns[-1].code
    grades = _execute([(r.final_code, r.task.hidden_tests, r.task) for r in to_grade])
    times.grading_s += time.monotonic() - started
    for rollout, grade in zip(to_grade, grades):
        rollout.status = grade.status
        if grade.status == R.INFRA_ERROR:
            rollout.flags.append("infra_error")
            continue
        rollout.tests_passed, rollout.tests_total = grade.tests_passed, grade.tests_total
        rollout.reward = grade.tests_passed / grade.tests_total if grade.tests_total else 0.0
        if grade.status in (R.TIMEOUT, R.CRASHED, R.MEMORY_LIMIT, R.OUTPUT_LIMIT):
            rollout.flags.append(grade.status)
    for rollout in rollouts:
        if rollout.dropped:
            rollout.status = R.INFRA_ERROR
    return rollouts, times
