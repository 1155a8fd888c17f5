"""The rollout loop: generate, step the environment, observe, revise; then grade. Every mode.

One trajectory per (task, group member), each an episode of an
:class:`~training.agents.environment.Environment`: under ``rollout_mode="agent"`` the task
family's environment (tool calls in a sandbox session); under ``"completion"`` the code-only
:class:`~training.agents.completion.CompletionEnvironment` (the turn is the program, run on the
visible tests). One loop, one record (:class:`Rollout`), one config (:class:`RolloutConfig`),
as verl runs single-turn rollouts as one more agent loop.

Token in, token out: a trajectory's training sequence is built only by concatenating ids
(:class:`~training.agents.trajectory.AgentTrajectory`): the templated prompt, then each turn's
sampled ids (loss mask 1) and the observation ids that followed (mask 0).

Scheduling: the groups are split into ``overlap_chunks`` chunks of whole groups that take
turns. A chunk generates one batch for its live trajectories, its steps go to a thread pool,
and the next chunk generates while they run: the generation hides the tools' and sandboxes'
time (``RolloutStats.tool_hidden_share``). The order of the batches and their members never
depends on how long a step took, so a seeded generator draws the same samples on every run
(a resumed run replays an uninterrupted one).

A trajectory ends when its episode is done (``submit``; a completion whose code passes the
visible tests), after ``max_turns`` turns, when its next observation or turn would not fit its
token budget (``truncated``), or when its session or sandbox is lost (``infra_error``: dropped,
never scored). Past its wall-clock budget ``timeout_s`` it takes no further turn (its first
turn always runs), ends ``timeout`` and is not graded: status ``timeout``, reward 0, flag
``rollout_timeout``. Every other trajectory is graded in a fresh sandbox on the hidden tests:
its final workspace (the session's changes on the task's files, test configuration restored),
or its last program.
"""

from __future__ import annotations

import concurrent.futures as futures
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch
from redis.exceptions import RedisError

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.sessions import SessionError, SessionLost
from tasks_library.task_spec import TaskSpec
from training import flags
from training.agents import trajectory as T
from training.agents.completion import CompletionEnvironment
from training.agents.environment import Environment, Opening, Step, environment_for
from training.agents.parsers import ParsedMessage
from training.config import RunConfig
from training.generation import sample_batch
from training.scoring import Scorer

__all__ = [
    "ROLLOUT_ENVIRONMENTS",
    "RUN_KEY",
    "Rollout",
    "RolloutConfig",
    "RolloutStats",
    "TaskSpec",
    "apply_grades",
    "collect_rollouts",
    "grading_record",
    "sandbox_demand",
]

RUN_KEY = "run_key"
"""Metadata key of a :class:`RolloutConfig` field: the :class:`~training.config.RunConfig` key it
is read from when that key's name differs from the field's, None when it is no run setting."""


@dataclass
class RolloutConfig:
    """How trajectories are rolled out, in every rollout mode. Units: tokens, seconds.

    Attributes:
        rollout_mode: ``completion`` (the policy writes the program; each turn runs it on the
            visible tests) or ``agent`` (multi-turn tool use in a sandbox session): the
            environment of every task (:data:`ROLLOUT_ENVIRONMENTS`).
        group_size: trajectories per task.
        max_turns: turns per trajectory.
        max_new_tokens: tokens one turn may sample.
        max_tokens: a trajectory's token budget (prompt, turns and observations); 0: the
            model's context length. The smaller of the two is the context guard's limit.
        timeout_s: one trajectory's wall-clock budget over all its turns.
        overlap_chunks: chunks of whole groups that take turns, so that one chunk's steps run
            while the next chunk generates.
        tool_threads: steps run at once (sessions and sandboxes are independent).
        tool_call_format: the parser of an agent policy's tool calls (``hermes``).

    A run's rollout settings are its :class:`~training.config.RunConfig` keys of the same
    names (:meth:`from_run_config`); the defaults are that class's. A new rollout setting is a
    field here and its key (with its check) in ``RunConfig``; nothing copies it by hand. The
    fields whose :data:`RUN_KEY` is None are how the loop schedules, not run settings.
    """

    rollout_mode: str = RunConfig.rollout_mode
    group_size: int = RunConfig.group_size
    max_turns: int = RunConfig.max_turns
    max_new_tokens: int = RunConfig.max_new_tokens
    max_tokens: int = RunConfig.max_tokens
    temperature: float = RunConfig.temperature
    top_p: float = RunConfig.top_p
    timeout_s: float = field(
        default=RunConfig.rollout_timeout_s, metadata={RUN_KEY: "rollout_timeout_s"}
    )
    overlap_chunks: int = field(default=2, metadata={RUN_KEY: None})
    tool_threads: int = field(default=32, metadata={RUN_KEY: None})
    tool_call_format: str = field(default="hermes", metadata={RUN_KEY: None})

    @classmethod
    def from_run_config(cls, config: RunConfig) -> RolloutConfig:
        """The rollout settings of run configuration ``config``: each field read from the key of
        the same name, or from the key its :data:`RUN_KEY` metadata names; a field whose key is
        None keeps its default."""
        keys = {f.name: f.metadata.get(RUN_KEY, f.name) for f in fields(cls)}
        return cls(**{name: getattr(config, key) for name, key in keys.items() if key is not None})


@dataclass
class Rollout:
    """One trajectory of one task version, graded: what the update, the scoring, the detectors
    and the run's records read.

    Attributes:
        task: the task version.
        group, index_in_group: its group (one per task in the batch) and place in it.
        trajectory: ids, loss mask, log-probs, turns and conversation.
        status: the grading's status (``ok``, ``failed``, ``timeout``, ``infra_error``...).
        reward, advantage, reward_components: set by the scorer and the update.
        flags, flag_evidence: hack and sandbox flags, and what each detector saw.
        final_code: the graded program (completion) or the changed sources (agent), for the
            code detectors and the replay.
        final_diff: the session's diff of the final workspace (agent).
        changed_code: repository tasks' changed sources, ``{path: (source, changed lines)}``.
        last_visible: the last visible-test result the episode ran, where it runs one every
            turn (completion), read by the code detectors.
        started: ``time.monotonic()`` when its episode opened.
        opening: what the episode opened with (system, user, tools), for the replay; None where
            it is the task version's prompt (completion).
        grading: the hidden-test grading per test id (:func:`grading_record`).
    """

    task: TaskSpec
    group: int
    index_in_group: int
    trajectory: T.AgentTrajectory
    status: str = ""
    reward: float = 0.0
    tests_passed: int = 0
    tests_total: int = 0
    flags: list[str] = field(default_factory=list)
    advantage: float = 0.0
    reward_components: dict = field(default_factory=dict)  # name -> value in [0, 1]
    flag_evidence: dict = field(default_factory=dict)  # hack flag -> what its detector saw
    final_code: str = ""
    final_diff: str = ""
    changed_code: dict = field(default_factory=dict)
    last_visible: R.ExecutionResult | None = None
    started: float = 0.0
    opening: Opening | None = None
    grading: dict = field(default_factory=dict)

    @property
    def turns(self) -> list[T.AgentTurn]:
        return self.trajectory.turns

    @property
    def prompt_ids(self) -> list[int]:
        """The templated opening the trajectory starts with."""
        return self.trajectory.ids[: self.trajectory.prompt_length]

    @property
    def sampled_tokens(self) -> int:
        """Tokens the policy sampled over all turns (observations excluded)."""
        return sum(self.trajectory.mask)

    @property
    def dropped(self) -> bool:
        """Dropped trajectories (infrastructure failures) are neither scored nor trained on."""
        return flags.INFRA_ERROR in self.flags

    @property
    def passed(self) -> bool:
        """Every hidden test passed (a suite with no test never passes)."""
        return self.tests_total > 0 and self.tests_passed == self.tests_total

    def sequence_and_mask(self) -> tuple[list[int], list[int]]:
        """The trained sequence and its loss mask (1 on sampled ids only)."""
        return self.trajectory.sequence_and_mask()


@dataclass
class RolloutStats:
    """What one batch of rollouts did. Seconds are wall time.

    Attributes:
        generation_s: time in generation batches.
        tool_s: the steps' own time (tool calls, visible-test runs), summed over trajectories
            (they overlap).
        tool_wait_s: time the loop waited for steps with nothing to generate (not hidden).
        grading_s: time grading the final workspaces.
        session_open_s: time opening the sessions.
        wall_s: the whole batch, sessions opened to grades in.
    """

    generation_s: float = 0.0
    tool_s: float = 0.0
    tool_wait_s: float = 0.0
    grading_s: float = 0.0
    session_open_s: float = 0.0
    wall_s: float = 0.0
    generated_tokens: int = 0
    generation_batches: int = 0
    turns: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    parse_errors: int = 0
    end_reasons: Counter = field(default_factory=Counter)

    # The names of the trainer's step metrics.
    @property
    def sandbox_s(self) -> float:
        """Time waiting for steps that generation did not hide."""
        return self.tool_wait_s

    @property
    def sandbox_busy_s(self) -> float:
        return self.tool_s

    @property
    def tool_hidden_share(self) -> float:
        """The share of step time that generation hid (1: the loop never waited for a step)."""
        if self.tool_s <= 0:
            return 1.0
        return max(0.0, 1.0 - self.tool_wait_s / self.tool_s)

    def metrics(self, rollouts: list[Rollout]) -> dict:
        """Per-step metrics: ``timing/*`` in seconds and ``tokens/generated``; where the batch
        had agent turns (tool calls), ``agent/*``: turns, calls per tool, parse errors, end
        reasons and the share of tool time generation hid."""
        out = {
            "timing/generation_s": self.generation_s,
            "timing/sandbox_s": self.sandbox_s,
            "timing/sandbox_busy_s": self.sandbox_busy_s,
            "timing/tool_s": self.tool_s,
            "timing/tool_wait_s": self.tool_wait_s,
            "timing/grading_s": self.grading_s,
            "tokens/generated": self.generated_tokens,
        }
        if not any(turn.action == T.TOOL_CALLS for r in rollouts for turn in r.turns):
            return out
        count = max(1, len(rollouts))
        out |= {
            "agent/turns_mean": sum(len(r.turns) for r in rollouts) / count,
            "agent/tool_calls_mean": sum(self.tool_calls.values()) / count,
            "agent/parse_errors": self.parse_errors,
            "agent/truncated": self.end_reasons.get(T.TRUNCATED, 0),
            "agent/submitted": self.end_reasons.get(T.SUBMITTED, 0),
            "agent/max_turns": self.end_reasons.get(T.MAX_TURNS, 0),
            "agent/timeout": self.end_reasons.get(T.TIMEOUT, 0),
            "agent/tool_hidden_share": self.tool_hidden_share,
        }
        for name, calls in sorted(self.tool_calls.items()):
            out[f"agent/calls_{name}"] = calls
        return out


def apply_grades(
    rollouts: list[Rollout], grades: list[R.ExecutionResult]
) -> tuple[list[Rollout], list[R.ExecutionResult]]:
    """Record each hidden-test grading on its rollout (status, tests passed, a sandbox status
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
GRADING_OUTPUT_CHARS = 4000
GRADING_OUTPUTS_KEPT = 20  # the first tests' outputs (a verifier's; a few probe calls')


def grading_record(grade: R.ExecutionResult) -> dict:
    """What a trajectory keeps of its hidden-test grading, for the replay: ``{"status", "tests":
    [{"id", "passed", "error", "output"?}]}`` (at most :data:`GRADING_TESTS_KEPT` tests, each
    error cut to :data:`GRADING_ERROR_CHARS` characters, the output of each of the first
    :data:`GRADING_OUTPUTS_KEPT` tests that has one (a terminal task's verifier: what it printed)
    to its last :data:`GRADING_OUTPUT_CHARS`;
    ``"cut"``: how many tests were left out)."""
    tests = [
        {"id": t.id, "passed": t.passed, "error": (t.error or "")[:GRADING_ERROR_CHARS]}
        | (
            {"output": t.output[-GRADING_OUTPUT_CHARS:]}
            if t.output and index < GRADING_OUTPUTS_KEPT
            else {}
        )
        for index, t in enumerate(grade.tests[:GRADING_TESTS_KEPT])
    ]
    record = {"status": grade.status, "tests": tests}
    if len(grade.tests) > GRADING_TESTS_KEPT:
        record["cut"] = len(grade.tests) - GRADING_TESTS_KEPT
    return record


def sandbox_demand(tasks: list[TaskSpec], each: int = 1) -> dict[str, int]:
    """Executions about to be queued for ``tasks`` (``each`` per task), per sandbox runtime."""
    return {runtime: count * each for runtime, count in Counter(t.runtime for t in tasks).items()}


ROLLOUT_ENVIRONMENTS: dict[str, Callable[[TaskSpec], Environment]] = {
    "completion": CompletionEnvironment,
    "agent": environment_for,
}
"""The environment of a task under each rollout mode (``RolloutConfig.rollout_mode``): the
policy writes the program itself, or works through the task family's tools."""


class _Live:
    """A trajectory being rolled out: its rollout, environment (with the policy's rendering of
    the episode and the parser of its turns, where it takes turns) and pending step."""

    def __init__(self, rollout: Rollout, env: Environment, template=None, parser=None) -> None:
        self.rollout, self.env = rollout, env
        self.template, self.parser = template, parser
        self.pending: futures.Future | None = None

    @property
    def trajectory(self) -> T.AgentTrajectory:
        return self.rollout.trajectory


_LOST = object()  # a session that could not be opened


def _sessions(env: Environment, task: TaskSpec, count: int) -> list:
    """``count`` sessions opened at once on ``env``'s workspace with the task's environment
    (its packages in each), ``_LOST`` each when they could not be opened; None each where the
    environment needs no session."""
    if not env.needs_session:
        return [None] * count
    try:
        return env.open_sessions(count)
    except SessionLost:
        return [_LOST] * count


def _open(policy, tasks: list[TaskSpec], config: RolloutConfig, first_group: int) -> list[_Live]:
    """One environment (and session, where it needs one) per trajectory; a group's sessions
    are opened at once."""
    live = []
    limit = policy.n_positions
    if config.max_tokens:
        limit = min(limit, config.max_tokens)
    make = ROLLOUT_ENVIRONMENTS[config.rollout_mode]
    for g, task in enumerate(tasks):
        envs = [make(task) for _ in range(config.group_size)]
        sessions = _sessions(envs[0], task, config.group_size)
        for i, (env, session) in enumerate(zip(envs, sessions, strict=True)):
            trajectory = T.AgentTrajectory(limit=limit)
            rollout = Rollout(task, first_group + g, i, trajectory, started=time.monotonic())
            item = _Live(rollout, env, env.template(policy), env.parser(config.tool_call_format))
            if session is _LOST:
                trajectory.end(T.LOST)
                rollout.flags.append(flags.INFRA_ERROR)
            else:
                opening = env.open(session)
                rollout.opening = opening if env.records_opening else None
                messages = opening.messages()
                prompt = item.template.prompt_ids(messages, tools=opening.tools)
                rollout.trajectory = T.AgentTrajectory.start(prompt, messages, limit=limit)
            live.append(item)
    return live


def _generate(
    policy,
    ready: list[_Live],
    config: RolloutConfig,
    generator: torch.Generator | None,
    stats: RolloutStats,
) -> list[tuple[_Live, ParsedMessage]]:
    """Sample one turn for every ready trajectory in one batch; append it (mask 1)."""
    started = time.monotonic()
    samples = sample_batch(
        policy,
        [item.trajectory.ids for item in ready],
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        stop_ids=(policy.end_id,),
        generator=generator,
    )
    seconds = time.monotonic() - started
    stats.generation_s += seconds
    stats.generation_batches += 1
    out = []
    for item, sample in zip(ready, samples, strict=True):
        stats.generated_tokens += len(sample.token_ids)
        body = sample.token_ids[:-1] if sample.stopped else sample.token_ids
        text = policy.decode(body)
        parsed = item.parser.parse(text)
        turn = T.AgentTurn(
            index=len(item.trajectory.turns),
            sampled_ids=sample.token_ids,
            logprobs=sample.logprobs,
            text=text,
            stopped=sample.stopped,
            message=parsed.to_message(),
            parse_errors=list(parsed.errors),
            generation_s=seconds / len(ready),
            action=item.env.action,
        )
        item.trajectory.add_turn(turn)
        stats.turns += 1
        stats.parse_errors += len(parsed.errors)
        out.append((item, parsed))
    return out


def _timed_step(env: Environment, parsed: ParsedMessage) -> tuple[Step | None, float]:
    """``env.step(parsed)`` and its seconds; None when the session or sandbox was lost (a call
    the workspace refuses is an error observation inside the step, never an exception here)."""
    started = time.monotonic()
    try:
        return env.step(parsed), time.monotonic() - started
    except (SessionLost, RedisError):  # the session, or the way to it, is gone: not the policy's
        return None, time.monotonic() - started


def _over_budget(rollout: Rollout, config: RolloutConfig) -> bool:
    return time.monotonic() - rollout.started > config.timeout_s


def _observe(item: _Live, config: RolloutConfig, stats: RolloutStats) -> None:
    """Take a finished step into the trajectory and decide whether it goes on."""
    step, seconds = item.pending.result()
    item.pending = None
    trajectory, rollout = item.trajectory, item.rollout
    turn = trajectory.turns[-1]
    turn.tool_s = seconds
    stats.tool_s += seconds
    if step is None:
        trajectory.end(T.LOST)
        rollout.flags.append(flags.INFRA_ERROR)
        return
    turn.tools = step.records
    if step.visible is not None:
        rollout.last_visible = step.visible
    stats.tool_calls.update(r.name for r in step.records if r.call_id)
    if step.done:
        trajectory.end(T.SUBMITTED)
    elif len(trajectory.turns) >= config.max_turns:
        trajectory.end(T.MAX_TURNS)
    elif _over_budget(rollout, config):
        trajectory.end(T.TIMEOUT)
    else:
        ids = item.template.observation_ids(step.observations, closed=turn.stopped)
        trajectory.add_observation(step.observations, ids, reserve=config.max_new_tokens)


def _chunks(live: list[_Live], count: int) -> list[list[_Live]]:
    """``live`` split into ``count`` chunks of whole groups (a group is generated together)."""
    groups = sorted({item.rollout.group for item in live})
    per_chunk = max(1, -(-len(groups) // max(1, count)))
    chunks = []
    for start in range(0, len(groups), per_chunk):
        members = set(groups[start : start + per_chunk])
        chunks.append([item for item in live if item.rollout.group in members])
    return chunks


def _turns(policy, live, config, generator, stats, pool) -> None:
    """The turn loop: the chunks take turns; each takes in its finished steps (waiting for
    them if it must), then generates one batch for its trajectories still going, whose steps
    run on ``pool`` while the next chunk does the same."""
    chunks = _chunks(live, config.overlap_chunks)
    while any(not item.trajectory.done for item in live):
        for chunk in chunks:
            pending = [item.pending for item in chunk if item.pending is not None]
            if pending:
                started = time.monotonic()
                futures.wait(pending)
                stats.tool_wait_s += time.monotonic() - started
                for item in chunk:
                    if item.pending is not None:
                        _observe(item, config, stats)
            ready = [item for item in chunk if not item.trajectory.done]
            for item in ready:
                if item.trajectory.turns and _over_budget(item.rollout, config):
                    item.trajectory.end(T.TIMEOUT)
                elif item.trajectory.room() < config.max_new_tokens:
                    item.trajectory.end(T.TRUNCATED)
            ready = [item for item in ready if not item.trajectory.done]
            if ready:
                for item, parsed in _generate(policy, ready, config, generator, stats):
                    item.pending = pool.submit(_timed_step, item.env, parsed)


def _final(item: _Live):
    """``(queue request or None, own grading or None, graded code)`` of a trajectory's final
    workspace (environments that grade by themselves do it here, on the pool); None when the
    session was lost; the exception when the policy made the workspace ungradable."""
    try:
        item.rollout.final_diff = item.env.final_diff()
        files = item.env.final_files()
        code = item.env.graded_code(files)
        item.rollout.changed_code = item.env.changed_code(files)
        own = item.env.grade(files)
        return (None if own else item.env.grading_request(files)), own, code
    except (SessionLost, RedisError):
        return None
    except (SessionError, ValueError) as exc:
        return exc


def _grade(live: list[_Live], stats: RolloutStats, scorer: Scorer, pool) -> None:
    """Grade every trajectory that was neither lost nor timed out, from its final workspace,
    in fresh sandboxes (all queued at once; an ``infra_error`` is retried once, then
    dropped), and score the graded."""
    started = time.monotonic()
    to_grade = [item for item in live if not item.rollout.dropped]
    finals = list(pool.map(_final, to_grade))
    requests, queued, graded, results = [], [], [], []
    for item, outcome in zip(to_grade, finals, strict=True):
        rollout = item.rollout
        if outcome is None:
            rollout.flags.append(flags.INFRA_ERROR)
        elif isinstance(outcome, Exception):
            rollout.status, rollout.reward = R.FAILED, 0.0
            rollout.reward_components = {"correctness": 0.0}
            rollout.flag_evidence["ungradable_workspace"] = str(outcome)[:500]
        else:
            request, own, rollout.final_code = outcome
            if own is not None:
                graded.append(rollout)
                results.append(own)
            else:
                requests.append(request)
                queued.append(rollout)
    if requests:
        graded += queued
        results += run_many(requests, retry_infra_errors=True)
    scored, grades = apply_grades(graded, results)
    scorer.score(scored, grades)
    for item in to_grade:  # graded or not: an ungradable workspace keeps its evidence
        rollout = item.rollout
        if rollout.dropped:
            continue
        evidence = item.env.episode_evidence(rollout.trajectory, rollout.final_diff)
        rollout.flags += [name for name in evidence if name not in rollout.flags]
        rollout.flag_evidence.update(evidence)
        if evidence and scorer.hack_policy == "zero":
            rollout.reward = 0.0
    stats.grading_s += time.monotonic() - started


def _timed_out(item: _Live) -> None:
    """A trajectory past its wall-clock budget: not graded, no reward (its final program is
    kept for the replay)."""
    rollout = item.rollout
    rollout.flags.append(flags.ROLLOUT_TIMEOUT)
    rollout.status, rollout.reward, rollout.reward_components = R.TIMEOUT, 0.0, {}
    try:
        rollout.final_code = item.env.graded_code(item.env.final_files())
    except (SessionLost, SessionError, RedisError, ValueError):
        rollout.final_code = ""


def collect_rollouts(
    policy,
    tasks: list[TaskSpec],
    config: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
    first_group: int = 0,
    scorer: Scorer | None = None,
    on_phase: Callable[[str, dict[str, int]], None] | None = None,
) -> tuple[list[Rollout], RolloutStats]:
    """Roll out ``config.group_size`` trajectories per task, then grade them.

    Args:
        policy: a :class:`training.policy.Policy` (completion) or
            :class:`training.agents.policy.AgentPolicy` (agent): ``n_positions``, ``end_id``,
            ``decode``, and what the environment renders with (``chat``).
        tasks: one task version per group; group numbers start at ``first_group``.
        generator: the sampling generator (seeded: the same samples on every run).
        scorer: turns grades into rewards (components, hack flags); default: correctness
            alone, no detectors.
        on_phase: told ``(phase, demand)`` as the batch moves on: ``"rollout"`` with the
            executions the trajectories will queue (runtime -> count), then ``"grading"`` with
            the gradings; the trainer announces it to the sandbox autoscaler
            (:class:`training.phase.PhaseTracker`).

    Returns:
        ``(rollouts, stats)``: ordered by group then index; each graded, ended ``timeout``
        (not graded, reward 0), or flagged ``infra_error`` (dropped: no reward).

    Raises:
        KeyError: ``config.rollout_mode`` is not a key of :data:`ROLLOUT_ENVIRONMENTS`.
        ValueError: a task's prompt alone does not fit the token budget, or a task has no
            environment under the mode.
    """
    stats = RolloutStats()
    wall = time.monotonic()
    if on_phase is not None:
        on_phase("rollout", sandbox_demand(tasks, each=config.group_size))
    with futures.ThreadPoolExecutor(max_workers=config.tool_threads) as pool:
        opened = time.monotonic()
        live = _open(policy, tasks, config, first_group)
        stats.session_open_s = time.monotonic() - opened
        try:
            _turns(policy, live, config, generator, stats, pool)
            timed_out = [item for item in live if item.trajectory.end_reason == T.TIMEOUT]
            for item in timed_out:
                _timed_out(item)
            gradable = [item for item in live if item not in timed_out]
            if on_phase is not None:
                on_phase(
                    "grading",
                    sandbox_demand([i.rollout.task for i in gradable if not i.rollout.dropped]),
                )
            _grade(gradable, stats, scorer or Scorer(detect_hacks=False), pool)
        finally:
            for item in live:
                if item.env.context is not None:
                    pool.submit(item.env.close)
    for item in live:
        if item.rollout.dropped:
            item.rollout.status, item.rollout.reward = R.INFRA_ERROR, 0.0
        stats.end_reasons[item.trajectory.end_reason] += 1
    stats.wall_s = time.monotonic() - wall
    return [item.rollout for item in live], stats
