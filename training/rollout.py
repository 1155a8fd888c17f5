"""Multi-turn rollouts: write code, run the visible tests, observe, revise; then grade.

Token in, token out: a trajectory's training sequence is built only by
concatenating ids, never by re-tokenizing text. It is

    [bos] + prompt ids + (sampled ids + observation ids) * turns

and the loss mask is 1 exactly on the sampled ids. Observation ids (sandbox output
and the re-shown prompt) are context the policy did not choose, so they are masked.

Grading runs the final code against the hidden tests in a fresh sandbox; the
agent's turns only ever saw the visible tests. A sandbox ``infra_error`` is retried
once, then the trajectory is flagged ``infra_error`` and dropped from the batch:
it gets no reward, not a reward of 0 (the trainer replays its task later).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

from sandboxes import result as R
from sandboxes.queue import infra_errors_retried, run_many, submit
from tasks_library.task_spec import TaskSpec
from training import flags
from training.config import RunConfig
from training.generation import sample_batch
from training.policy import Policy
from training.scoring import Scorer

OBSERVATION_TEXT_TOKENS = 48


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
    reward_components: dict = field(default_factory=dict)  # name -> value in [0, 1]
    flag_evidence: dict = field(default_factory=dict)  # hack flag -> what its detector saw
    # The visible-test result of the last turn (read by hack detectors; not persisted as such).
    last_visible: R.ExecutionResult | None = None
    # The hidden-test grading, per test id (grading_record; the replay shows it).
    grading: dict = field(default_factory=dict)

    @property
    def sampled_tokens(self) -> int:
        """Tokens the policy sampled over all turns (observations excluded)."""
        return sum(len(turn.token_ids) for turn in self.turns)

    @property
    def dropped(self) -> bool:
        """Dropped trajectories (infrastructure failures) are neither scored nor trained on."""
        return flags.INFRA_ERROR in self.flags

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


RUN_KEY = "run_key"
"""Metadata key of a :class:`RolloutConfig` field: the :class:`~training.config.RunConfig` key it
is read from when that key's name differs from the field's, None when it is no run setting."""


@dataclass
class RolloutConfig:
    """How trajectories are rolled out. Units: tokens, seconds.

    ``overlap_chunks`` splits the groups into that many chunks that take turns: while the
    sandboxes run one chunk's code, the policy generates for the next.
    ``timeout_s`` is one rollout's wall-clock budget over all its turns.

    A run's rollout settings are its :class:`~training.config.RunConfig` keys of the same
    names (:meth:`from_run_config`); the defaults are that class's. A new rollout setting is a
    field here and its key (with its check) in ``RunConfig``; nothing copies it by hand.
    """

    group_size: int = RunConfig.group_size
    max_turns: int = RunConfig.max_turns
    max_new_tokens: int = RunConfig.max_new_tokens
    temperature: float = RunConfig.temperature
    top_p: float = RunConfig.top_p
    timeout_s: float = field(
        default=RunConfig.rollout_timeout_s, metadata={RUN_KEY: "rollout_timeout_s"}
    )
    overlap_chunks: int = field(default=2, metadata={RUN_KEY: None})  # not a run setting

    @classmethod
    def from_run_config(cls, config: RunConfig) -> RolloutConfig:
        """The rollout settings of run configuration ``config``: each field read from the key of
        the same name, or from the key its :data:`RUN_KEY` metadata names; a field whose key is
        None keeps its default."""
        keys = {f.name: f.metadata.get(RUN_KEY, f.name) for f in fields(cls)}
        return cls(**{name: getattr(config, key) for name, key in keys.items() if key is not None})


@dataclass
class RolloutTimes:
    """Seconds per phase of one batch of rollouts.

    ``sandbox_s`` is the time spent waiting for sandbox results that generation did not
    hide; ``sandbox_busy_s`` sums the executions' own wall time (all workers together).
    """

    generation_s: float = 0.0
    sandbox_s: float = 0.0
    sandbox_busy_s: float = 0.0
    grading_s: float = 0.0
    generated_tokens: int = 0


def _requests(items: list[tuple[str, str, TaskSpec]]) -> list[dict]:
    return [task.request(code, tests) for code, tests, task in items]


def _execute(items: list[tuple[str, str, TaskSpec]]) -> list[R.ExecutionResult]:
    """Run ``(code, tests, task)`` items on the sandbox workers, all queued at once, retrying
    infra errors once."""
    requests = _requests(items)
    return run_many(requests, retry_infra_errors=True)


def apply_grades(
    rollouts: list[Rollout], grades: list[R.ExecutionResult]
) -> tuple[list[Rollout], list[R.ExecutionResult]]:
    """Record each hidden-test grading on its rollout (a :class:`Rollout`, or an agent rollout,
    which has the same status, flags and test fields: status, tests passed, a sandbox status
    such as ``timeout`` as a flag) and return the rollouts to score with their gradings: an
    ``infra_error`` grading is flagged and left out, since it says nothing of the rollout."""
    scored, scored_grades = [], []
    for rollout, grade in zip(rollouts, grades, strict=True):
        rollout.status = grade.status
        if grade.status == R.INFRA_ERROR:
            rollout.flags.append(flags.INFRA_ERROR)
            continue
        rollout.tests_passed, rollout.tests_total = grade.tests_passed, grade.tests_total
        rollout.grading = grading_record(grade)
        if grade.status in flags.SANDBOX_STATUSES:
            rollout.flags.append(grade.status)
        scored.append(rollout)
        scored_grades.append(grade)
    return scored, scored_grades


GRADING_TESTS_KEPT = 2000
GRADING_ERROR_CHARS = 1000


def grading_record(grade: R.ExecutionResult) -> dict:
    """What a trajectory keeps of its hidden-test grading, for the replay: ``{"status", "tests":
    [{"id", "passed", "error"}]}`` (at most :data:`GRADING_TESTS_KEPT` tests, each error cut to
    :data:`GRADING_ERROR_CHARS` characters; ``"cut"``: how many tests were left out)."""
    tests = [
        {"id": t.id, "passed": t.passed, "error": (t.error or "")[:GRADING_ERROR_CHARS]}
        for t in grade.tests[:GRADING_TESTS_KEPT]
    ]
    record = {"status": grade.status, "tests": tests}
    if len(grade.tests) > GRADING_TESTS_KEPT:
        record["cut"] = len(grade.tests) - GRADING_TESTS_KEPT
    return record


def sandbox_demand(tasks: list[TaskSpec], each: int = 1) -> dict[str, int]:
    """Executions about to be queued for ``tasks`` (``each`` per task), per sandbox runtime."""
    return {runtime: count * each for runtime, count in Counter(t.runtime for t in tasks).items()}


def observation_text(result: R.ExecutionResult) -> str:
    """What the policy is shown after running its code on the visible tests."""
    lines = [
        f"\n# sandbox: {result.status}, "
        f"visible tests passed {result.tests_passed}/{result.tests_total}"
    ]
    for test in result.tests:
        if not test.passed:
            lines.append(f"# {test.id} failed: {test.error[:120]}")
    if result.stderr.strip():
        lines.append("# stderr: " + result.stderr.strip().splitlines()[-1][:160])
    return "\n".join(lines) + "\n# revise:\n"


def _chunks(rollouts: list[Rollout], count: int) -> list[list[Rollout]]:
    """Split rollouts into ``count`` chunks of whole groups (a group is generated in one batch)."""
    groups = sorted({r.group for r in rollouts})
    per_chunk = max(1, -(-len(groups) // max(1, count)))
    chunks = []
    for start in range(0, len(groups), per_chunk):
        members = set(groups[start : start + per_chunk])
        chunks.append([r for r in rollouts if r.group in members])
    return chunks


def _generate(
    policy: Policy, active: list[Rollout], config: RolloutConfig, generator, times: RolloutTimes
) -> None:
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
    for rollout, sample in zip(active, samples, strict=True):
        text = policy.decode(sample.token_ids)
        times.generated_tokens += len(sample.token_ids)
        rollout.turns.append(
            TurnRecord(
                policy_text=text,
                token_ids=sample.token_ids,
                logprobs=sample.logprobs,
                code=rollout.task.prompt + text,
            )
        )


def _observe(
    policy: Policy,
    rollout: Rollout,
    result: R.ExecutionResult,
    *,
    last_turn: bool,
    config: RolloutConfig,
) -> None:
    """Record the sandbox's answer to the rollout's last turn and decide whether it goes on."""
    turn = rollout.turns[-1]
    turn.sandbox_status, turn.sandbox_result = result.status, result.to_dict()
    rollout.last_visible = result
    if result.status == R.INFRA_ERROR:
        rollout.flags.append(flags.INFRA_ERROR)
        rollout.done = True
        return
    if result.passed or last_turn:
        rollout.done = True
        return
    turn.observation = observation_text(result)
    feedback = policy.encode(turn.observation)[:OBSERVATION_TEXT_TOKENS]
    turn.observation_ids = [policy.obs_id, *feedback, *policy.encode(rollout.task.prompt)]
    if len(rollout.context_ids()) + config.max_new_tokens > policy.n_positions:
        # No room for another turn: the last code stands as the answer.
        turn.observation, turn.observation_ids = "", []
        rollout.done = True


def collect_rollouts(
    policy: Policy,
    tasks: list[TaskSpec],
    config: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
    first_group: int = 0,
    scorer: Scorer | None = None,
    on_phase: Callable[[str, dict[str, int]], None] | None = None,
) -> tuple[list[Rollout], RolloutTimes]:
    """Roll out ``config.group_size`` trajectories per task, then grade them.

    Each turn, the groups are split into ``config.overlap_chunks`` chunks: a chunk's
    code is queued to the sandboxes as soon as it is generated, and the policy goes on
    generating for the next chunk while the workers run it. A rollout past its
    ``config.timeout_s`` budget takes no further turn and ends ``timeout`` (reward 0,
    flag ``rollout_timeout``); the job goes on.

    Args:
        tasks: one task per group; group numbers start at ``first_group``.
        scorer: turns graded rollouts into rewards (components, hack flags); default:
            correctness alone, no detectors.
        on_phase: told ``(phase, demand)`` as the batch moves on: ``"rollout"`` before each
            turn with the executions its active rollouts will queue (runtime -> count), then
            ``"grading"`` with the gradings; the trainer announces it to the sandbox autoscaler
            (:class:`training.phase.PhaseTracker`).

    Returns:
        ``(rollouts, times)``: rollouts ordered by group then index, each graded, ended
        ``timeout``, or flagged ``infra_error`` (dropped: no reward); times in seconds.
    """
    times = RolloutTimes()
    rollouts = [
        Rollout(
            task=task,
            group=first_group + g,
            index_in_group=i,
            prompt_ids=[policy.bos_id, *policy.encode(task.prompt)],
        )
        for g, task in enumerate(tasks)
        for i in range(config.group_size)
    ]
    started = time.monotonic()
    chunks = _chunks(rollouts, config.overlap_chunks)
    for turn_index in range(config.max_turns):
        over_budget = time.monotonic() - started > config.timeout_s
        if on_phase is not None and not over_budget:
            on_phase("rollout", sandbox_demand([r.task for r in rollouts if not r.done]))
        in_flight = []
        for chunk in chunks:
            active = [r for r in chunk if not r.done]
            if over_budget:
                for rollout in active:
                    rollout.done = True
                    rollout.flags.append(flags.ROLLOUT_TIMEOUT)
                continue
            if not active:
                continue
            _generate(policy, active, config, generator, times)
            items = [(r.turns[-1].code, r.task.visible_tests, r.task) for r in active]
            requests = _requests(items)
            in_flight.append((active, requests, submit(requests)))
        for active, requests, batch in in_flight:
            waited = time.monotonic()
            results = infra_errors_retried(requests, batch.wait())
            times.sandbox_s += time.monotonic() - waited
            times.sandbox_busy_s += sum(result.wall_ms for result in results) / 1000
            for rollout, result in zip(active, results, strict=True):
                _observe(
                    policy,
                    rollout,
                    result,
                    last_turn=turn_index == config.max_turns - 1,
                    config=config,
                )
    if time.monotonic() - started > config.timeout_s:
        for rollout in rollouts:
            if flags.ROLLOUT_TIMEOUT not in rollout.flags and not rollout.dropped:
                rollout.flags.append(flags.ROLLOUT_TIMEOUT)

    grading_started = time.monotonic()
    to_grade = [r for r in rollouts if not r.dropped and flags.ROLLOUT_TIMEOUT not in r.flags]
    if on_phase is not None:
        on_phase("grading", sandbox_demand([r.task for r in to_grade]))
    for rollout in rollouts:
        rollout.final_code = rollout.turns[-1].code if rollout.turns else ""
    grades = _execute([(r.final_code, r.task.hidden_tests, r.task) for r in to_grade])
    scored, scored_grades = apply_grades(to_grade, grades)
    (scorer or Scorer(detect_hacks=False)).score(scored, scored_grades)
    times.grading_s += time.monotonic() - grading_started
    for rollout in rollouts:
        if rollout.dropped:
            rollout.status = R.INFRA_ERROR
        elif flags.ROLLOUT_TIMEOUT in rollout.flags:
            rollout.status, rollout.reward = R.TIMEOUT, 0.0
            rollout.reward_components = {}
    return rollouts, times
