"""Multi-turn agent rollouts: generate, call tools in the session, observe, revise; then grade.

One trajectory per (task, group member), each in its own sandbox session through its task's
:class:`~training.agents.environment.Environment`. Generation is batched across every
trajectory ready for its next turn, while the tool calls of the others run in their sessions
on a thread pool: a trajectory waiting for a slow tool does not hold back the batch (the
batch goes as soon as ``ready_fraction`` of the live trajectories are ready), and the
generation hides the tools' time (``AgentRolloutStats.tool_hidden_share``).

A trajectory ends when the policy calls ``submit``, after ``max_turns`` turns, when its next
observation or turn would not fit its token budget (``truncated``), past its wall-clock
budget (``timeout``), or when its session is lost (``infra_error``: dropped, never scored).
Every other trajectory is graded: its final workspace (the session's changes on the task's
files, test configuration restored) runs the hidden tests in a fresh sandbox.
"""

from __future__ import annotations

import concurrent.futures as futures
import time
from collections import Counter
from dataclasses import dataclass, field

import torch
from redis.exceptions import RedisError

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.sessions import SessionError, SessionLost, open_sessions
from training import flags
from training.agents import hacks as agent_hacks
from training.agents import trajectory as T
from training.agents.environment import Environment, Opening, Step, environment_for
from training.agents.parsers import ParsedMessage, ToolCallParser, parser_named
from training.agents.policy import AgentPolicy
from training.generation import sample_batch
from training.rollout import TaskSpec, apply_grades
from training.scoring import Scorer


@dataclass
class AgentRolloutConfig:
    """How agent trajectories are rolled out. Units: tokens, seconds.

    Attributes:
        group_size: trajectories per task.
        max_turns: assistant turns per trajectory.
        max_new_tokens: tokens one turn may sample.
        max_tokens: the trajectory's token budget (prompt, turns and observations); 0: the
            model's context length. The smaller of the two is the context guard's limit.
        timeout_s: one trajectory's wall-clock budget.
        ready_fraction: a generation batch goes once this share of the live trajectories is
            ready (the rest are waiting for tools).
        tool_threads: tool steps run at once (sessions are independent).
        tool_call_format: the parser of the policy's tool calls (``hermes``).
    """

    group_size: int = 4
    max_turns: int = 16
    max_new_tokens: int = 256
    max_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    timeout_s: float = 600.0
    ready_fraction: float = 0.5
    tool_threads: int = 32
    tool_call_format: str = "hermes"

    @classmethod
    def from_run_config(cls, config) -> AgentRolloutConfig:
        """The agent rollout settings of a :class:`~training.config.RunConfig`."""
        return cls(
            group_size=config.group_size,
            max_turns=config.max_turns,
            max_new_tokens=config.max_new_tokens,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            timeout_s=config.rollout_timeout_s,
        )


@dataclass
class AgentRollout:
    """One agent trajectory, graded. Duck-compatible with :class:`training.rollout.Rollout`
    where the update and scoring read it (``sequence_and_mask``, ``sampled_tokens``,
    ``dropped``, ``reward``, ``advantage``, ``final_code``...)."""

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
    reward_components: dict = field(default_factory=dict)
    flag_evidence: dict = field(default_factory=dict)
    final_code: str = ""
    final_diff: str = ""
    changed_code: dict = field(default_factory=dict)  # repository tasks: {path: (source, lines)}
    last_visible: R.ExecutionResult | None = None
    started: float = 0.0
    # What the episode opened with (system, user, tools), and its hidden-test grading per test id
    # (training.rollout.grading_record): the replay shows both.
    opening: Opening | None = None
    grading: dict = field(default_factory=dict)

    @property
    def turns(self) -> list[T.AgentTurn]:
        return self.trajectory.turns

    @property
    def prompt_ids(self) -> list[int]:
        """The templated opening (system, user, tool schemas) the trajectory starts with."""
        return self.trajectory.ids[: self.trajectory.prompt_length]

    @property
    def sampled_tokens(self) -> int:
        return sum(self.trajectory.mask)

    @property
    def dropped(self) -> bool:
        return flags.INFRA_ERROR in self.flags

    @property
    def passed(self) -> bool:
        return self.tests_total > 0 and self.tests_passed == self.tests_total

    def sequence_and_mask(self) -> tuple[list[int], list[int]]:
        return self.trajectory.sequence_and_mask()


@dataclass
class AgentRolloutStats:
    """What one batch of agent rollouts did. Seconds are wall time.

    Attributes:
        generation_s: time in generation batches.
        tool_s: the tool steps' own time, summed over trajectories (they overlap).
        tool_wait_s: time the loop waited for tools with nothing to generate (not hidden).
        grading_s: time grading the final workspaces.
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

    # The names the trainer's step metrics read (training.rollout.RolloutTimes).
    @property
    def sandbox_s(self) -> float:
        """Time waiting for tools that generation did not hide."""
        return self.tool_wait_s

    @property
    def sandbox_busy_s(self) -> float:
        return self.tool_s

    @property
    def tool_hidden_share(self) -> float:
        """The share of tool time that generation hid (1: the loop never waited for a tool)."""
        if self.tool_s <= 0:
            return 1.0
        return max(0.0, 1.0 - self.tool_wait_s / self.tool_s)

    def metrics(self, rollouts: list[AgentRollout]) -> dict:
        """Per-step metrics (``agent/*``, ``timing/*``)."""
        count = max(1, len(rollouts))
        out = {
            "agent/turns_mean": sum(len(r.turns) for r in rollouts) / count,
            "agent/tool_calls_mean": sum(self.tool_calls.values()) / count,
            "agent/parse_errors": self.parse_errors,
            "agent/truncated": self.end_reasons.get(T.TRUNCATED, 0),
            "agent/submitted": self.end_reasons.get(T.SUBMITTED, 0),
            "agent/max_turns": self.end_reasons.get(T.MAX_TURNS, 0),
            "agent/timeout": self.end_reasons.get(T.TIMEOUT, 0),
            "agent/tool_hidden_share": self.tool_hidden_share,
            "timing/generation_s": self.generation_s,
            "timing/tool_s": self.tool_s,
            "timing/tool_wait_s": self.tool_wait_s,
            "timing/grading_s": self.grading_s,
            "tokens/generated": self.generated_tokens,
        }
        for name, calls in sorted(self.tool_calls.items()):
            out[f"agent/calls_{name}"] = calls
        return out


class _Live:
    """A trajectory being rolled out: its rollout, environment and pending tool step."""

    def __init__(self, rollout: AgentRollout, env: Environment) -> None:
        self.rollout, self.env = rollout, env
        self.pending: futures.Future | None = None

    @property
    def trajectory(self) -> T.AgentTrajectory:
        return self.rollout.trajectory


def _open(
    policy: AgentPolicy, tasks: list[TaskSpec], config: AgentRolloutConfig, first_group: int
) -> list[_Live]:
    """One environment and session per trajectory (a group's sessions opened at once)."""
    live = []
    limit = policy.n_positions
    if config.max_tokens:
        limit = min(limit, config.max_tokens)
    for g, task in enumerate(tasks):
        envs = [environment_for(task) for _ in range(config.group_size)]
        try:
            sessions = open_sessions(
                envs[0].workspace(),
                config.group_size,
                limits=envs[0].session_limits,
                environment=task.environment,  # its packages in every session of the group
            )
        except SessionLost:
            sessions = [None] * config.group_size
        for i, (env, session) in enumerate(zip(envs, sessions, strict=True)):
            trajectory = T.AgentTrajectory(limit=limit)
            rollout = AgentRollout(task, first_group + g, i, trajectory, started=time.monotonic())
            if session is None:
                trajectory.end(T.LOST)
                rollout.flags.append(flags.INFRA_ERROR)
            else:
                opening = env.open(session)
                rollout.opening = opening
                messages = opening.messages()
                prompt = policy.chat.prompt_ids(messages, tools=opening.tools)
                rollout.trajectory = T.AgentTrajectory.start(prompt, messages, limit=limit)
            live.append(_Live(rollout, env))
    return live


def _generate(
    policy: AgentPolicy,
    ready: list[_Live],
    config: AgentRolloutConfig,
    parser: ToolCallParser,
    generator: torch.Generator | None,
    stats: AgentRolloutStats,
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
        parsed = parser.parse(text)
        turn = T.AgentTurn(
            index=len(item.trajectory.turns),
            sampled_ids=sample.token_ids,
            logprobs=sample.logprobs,
            text=text,
            stopped=sample.stopped,
            message=parsed.to_message(),
            parse_errors=list(parsed.errors),
            generation_s=seconds / len(ready),
        )
        item.trajectory.add_turn(turn)
        stats.turns += 1
        stats.parse_errors += len(parsed.errors)
        out.append((item, parsed))
    return out


def _timed_step(env: Environment, parsed: ParsedMessage) -> tuple[Step | None, float]:
    """``env.step(parsed)`` and its seconds; None when the session was lost (a call the
    workspace refuses is an error observation inside the step, never an exception here)."""
    started = time.monotonic()
    try:
        return env.step(parsed), time.monotonic() - started
    except (SessionLost, RedisError):  # the session, or the way to it, is gone: not the policy's
        return None, time.monotonic() - started


def _observe(
    policy: AgentPolicy, item: _Live, config: AgentRolloutConfig, stats: AgentRolloutStats
) -> None:
    """Take a finished tool step into the trajectory and decide whether it goes on."""
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
    stats.tool_calls.update(r.name for r in step.records if r.call_id)
    if step.done:
        trajectory.end(T.SUBMITTED)
    elif len(trajectory.turns) >= config.max_turns:
        trajectory.end(T.MAX_TURNS)
    elif time.monotonic() - rollout.started > config.timeout_s:
        trajectory.end(T.TIMEOUT)
    else:
        ids = policy.chat.observation_ids(step.observations, closed=turn.stopped)
        trajectory.add_observation(step.observations, ids, reserve=config.max_new_tokens)


def _grade(live: list[_Live], stats: AgentRolloutStats, scorer: Scorer, pool) -> None:
    """Grade every trajectory that was not lost, from its session's final workspace, in fresh
    sandboxes (all queued at once; an ``infra_error`` is retried once, then dropped)."""
    started = time.monotonic()

    def final(item: _Live):
        """``(queue request or None, own grading or None, graded code)`` of a trajectory's
        final workspace (environments that grade by themselves do it here, on the pool)."""
        try:
            item.rollout.final_diff = item.env.session.diff(max_bytes=256 * 1024)
            files = item.env.final_files()
            code = item.env.graded_code(files)
            item.rollout.changed_code = item.env.changed_code(files)
            own = item.env.grade(files)
            return (None if own else item.env.grading_request(files)), own, code
        except (SessionLost, RedisError):
            return None
        except (SessionError, ValueError) as exc:  # the policy made the workspace ungradable
            return exc

    to_grade = [item for item in live if not item.rollout.dropped]
    finals = list(pool.map(final, to_grade))
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
        evidence = agent_hacks.detect(
            rollout.trajectory,
            rollout.final_diff,
            workspace=item.env.workspace().files(),
            hidden=item.env.hidden_paths(),
        )
        rollout.flags += [name for name in evidence if name not in rollout.flags]
        rollout.flag_evidence.update(evidence)
        if evidence and scorer.hack_policy == "zero":
            rollout.reward = 0.0
    for item in live:
        if item.rollout.dropped:
            item.rollout.status, item.rollout.reward = R.INFRA_ERROR, 0.0
    stats.grading_s += time.monotonic() - started


def collect_agent_rollouts(
    policy: AgentPolicy,
    tasks: list[TaskSpec],
    config: AgentRolloutConfig,
    *,
    generator: torch.Generator | None = None,
    first_group: int = 0,
    scorer: Scorer | None = None,
) -> tuple[list[AgentRollout], AgentRolloutStats]:
    """Roll out ``config.group_size`` agent trajectories per task, then grade them.

    Args:
        tasks: one task version per group; group numbers start at ``first_group``.
        scorer: turns grades into rewards (components, hack flags); default: correctness
            alone, no detectors.

    Returns:
        ``(rollouts, stats)``: ordered by group then index; each graded, or flagged
        ``infra_error`` (dropped: no reward).
    """
    stats = AgentRolloutStats()
    parser = parser_named(config.tool_call_format)
    wall = time.monotonic()
    with futures.ThreadPoolExecutor(max_workers=config.tool_threads) as pool:
        opened = time.monotonic()
        live = _open(policy, tasks, config, first_group)
        stats.session_open_s = time.monotonic() - opened
        try:
            _turns(policy, live, config, parser, generator, stats, pool)
            _grade(live, stats, scorer or Scorer(detect_hacks=False), pool)
        finally:
            for item in live:
                if item.env.context is not None:
                    pool.submit(item.env.close)
    for item in live:
        stats.end_reasons[item.trajectory.end_reason] += 1
    stats.wall_s = time.monotonic() - wall
    return [item.rollout for item in live], stats


def _turns(policy, live, config, parser, generator, stats, pool) -> None:
    """The turn loop: generate for the ready, run their calls on ``pool``, take observations
    in as they finish."""
    while True:
        active = [item for item in live if not item.trajectory.done]
        if not active:
            return
        for item in active:
            if item.pending is not None and item.pending.done():
                _observe(policy, item, config, stats)
        ready = [i for i in active if i.pending is None and not i.trajectory.done]
        for item in ready:
            if time.monotonic() - item.rollout.started > config.timeout_s:
                item.trajectory.end(T.TIMEOUT)
            elif item.trajectory.room() < config.max_new_tokens:
                item.trajectory.end(T.TRUNCATED)
        ready = [i for i in ready if not i.trajectory.done]
        waiting = [i.pending for i in active if i.pending is not None]
        still = sum(not i.trajectory.done for i in active)
        if ready and (len(ready) >= max(1, config.ready_fraction * still) or not waiting):
            for item, parsed in _generate(policy, ready, config, parser, generator, stats):
                item.pending = pool.submit(_timed_step, item.env, parsed)
        elif waiting:
            started = time.monotonic()
            futures.wait(waiting, return_when=futures.FIRST_COMPLETED)
            stats.tool_wait_s += time.monotonic() - started
