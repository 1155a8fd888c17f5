"""A multi-turn agent trajectory, assembled token in / token out.

    ids  = prompt ids | sampled ids (turn 1) | observation ids | sampled ids (turn 2) | ...
    mask =     0      |         1            |        0        |          1           | ...

The prompt and each observation increment come from the policy's chat template
(:class:`training.agents.chat.ChatTemplate`); sampled ids are kept exactly as sampled
(with their log-probabilities), never decoded and re-encoded. The loss mask is 1 exactly
on sampled ids: which ids they are is recorded when they are appended, never inferred
from their values, so a tokenizer whose pad equals its end-of-sequence token keeps a
sampled end token trained and padding untrained.

Context-length guard: an observation whose ids, plus room for the next turn, would pass
the trajectory's limit is dropped and the trajectory ends ``truncated``; ids, mask and
log-probs stay the same length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# How a trajectory ended.
SUBMITTED = "submitted"  # the policy called submit
MAX_TURNS = "max_turns"  # the turn budget ran out
TRUNCATED = "truncated"  # the next observation or turn would not fit the context / token budget
TIMEOUT = "timeout"  # the wall-clock budget ran out
LOST = "infra_error"  # its session was lost (not the policy's fault: never scored)
END_REASONS = (SUBMITTED, MAX_TURNS, TRUNCATED, TIMEOUT, LOST)

# What a turn is stored as (Turn.action): the replay draws each its own way.
TOOL_CALLS = "tool_calls"  # an agent's turn: its tool calls, their outputs and diffs
RUN_CODE = "run_code"  # a completion turn: the whole program, run on the visible tests


@dataclass
class ToolRecord:
    """One tool call and its result, as the environment ran it.

    Attributes:
        call_id: the call's id in its turn (``call_<n>``), or ``""`` for a parse error.
        name: the tool's name as the policy wrote it.
        arguments: the arguments as the policy wrote them.
        output: the observation text the policy got (truncated to the budget).
        error: True when the call was refused (unknown tool, bad arguments, parse error) or
            failed.
        seconds: wall time of the call.
        diff: the workspace diff after an editing call (for the console), else ``""``.
        effects: what the call changed in the workspace
            (``training.agents.effects.effects_between``: ``{path: {"before", "after"}}``),
            None where it was not measured.
        network: the session's network counters the call moved (``{"no_route": n}``).
        result: a ``run_code`` call's execution result
            (:meth:`sandboxes.result.ExecutionResult.to_dict`), else None.
    """

    call_id: str
    name: str
    arguments: dict
    output: str
    error: bool = False
    seconds: float = 0.0
    diff: str = ""
    effects: dict | None = None
    network: dict = field(default_factory=dict)
    result: dict | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class AgentTurn:
    """One assistant turn and the environment's answer.

    Attributes:
        sampled_ids, logprobs: what the policy sampled (same length).
        text: ``sampled_ids`` decoded (markers kept), end-of-turn token removed.
        stopped: the turn ended with the end-of-turn token (False: its token budget ran out).
        message: the parsed OpenAI-style assistant message.
        parse_errors: malformed calls of the turn.
        tools: the calls run, in order.
        observation_ids: the templated increment that followed (empty on the last turn).
        generation_s, tool_s: seconds sampling this turn (its share of the batch) and
            running its calls.
        action: :data:`TOOL_CALLS` or :data:`RUN_CODE` (the environment's).
    """

    index: int
    sampled_ids: list[int]
    logprobs: list[float]
    text: str
    stopped: bool
    message: dict = field(default_factory=dict)
    parse_errors: list[str] = field(default_factory=list)
    tools: list[ToolRecord] = field(default_factory=list)
    observation_ids: list[int] = field(default_factory=list)
    generation_s: float = 0.0
    tool_s: float = 0.0
    action: str = TOOL_CALLS

    # The names the run's records store a turn under (training.services.step_record).
    @property
    def policy_text(self) -> str:
        return self.text

    @property
    def token_ids(self) -> list[int]:
        return self.sampled_ids

    @property
    def _run(self) -> ToolRecord | None:
        """The program a ``run_code`` turn ran, or None."""
        return self.tools[-1] if self.action == RUN_CODE and self.tools else None

    @property
    def code(self) -> str:
        """A ``run_code`` turn's program; else the workspace diff after the turn's last editing
        call, or ``""``."""
        if self._run is not None:
            return self._run.arguments["code"]
        diffs = [record.diff for record in self.tools if record.diff]
        return diffs[-1] if diffs else ""

    @property
    def observation(self) -> str:
        """The tool outputs the policy saw after this turn, one block per call (a ``run_code``
        turn: its visible-test feedback, where the episode went on)."""
        if self._run is not None:
            return self._run.output if self.observation_ids else ""
        return "\n\n".join(
            f"[{record.name or 'parse error'}] {record.output}" for record in self.tools
        ) + "".join(f"\n[parse error] {error}" for error in self.parse_errors if not self.tools)

    @property
    def sandbox_status(self) -> str:
        if self._run is not None:
            return self._run.result["status"]
        return "error" if any(record.error for record in self.tools) else "ok"

    @property
    def sandbox_result(self) -> dict:
        """A ``run_code`` turn's execution result; else the turn's calls for the console
        (arguments, outputs, diffs, seconds) and its parse errors."""
        if self._run is not None:
            return self._run.result
        return {
            "message": self.message,
            "tool_calls": [record.to_dict() for record in self.tools],
            "parse_errors": self.parse_errors,
            "stopped": self.stopped,
            "generation_s": self.generation_s,
            "tool_s": self.tool_s,
        }


@dataclass
class AgentTrajectory:
    """Ids, loss mask and log-probs of one trajectory, and its conversation.

    Attributes:
        limit: the most ids it may hold (the model's context length, or a smaller token
            budget).
        messages: the conversation, OpenAI-style (system, user, assistant with tool_calls,
            tool), for the console, demonstrations and review.
        end_reason: one of :data:`END_REASONS` once it ended, else ``""``.
    """

    limit: int
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    turns: list[AgentTurn] = field(default_factory=list)
    prompt_length: int = 0
    end_reason: str = ""

    @classmethod
    def start(cls, prompt_ids: list[int], messages: list[dict], *, limit: int) -> AgentTrajectory:
        """A trajectory holding its prompt (mask 0).

        Raises:
            ValueError: the prompt alone does not fit ``limit``.
        """
        if len(prompt_ids) >= limit:
            raise ValueError(
                f"the prompt has {len(prompt_ids)} tokens, the trajectory's limit is {limit}: "
                f"raise the token budget or use a model with a longer context"
            )
        return cls(
            limit=limit,
            ids=list(prompt_ids),
            mask=[0] * len(prompt_ids),
            logprobs=[0.0] * len(prompt_ids),
            messages=[dict(m) for m in messages],
            prompt_length=len(prompt_ids),
        )

    @classmethod
    def of(
        cls, prompt_ids: list[int], turns: list[AgentTurn], *, limit: int = 0
    ) -> AgentTrajectory:
        """A trajectory assembled from turns sampled elsewhere, each followed by its
        ``observation_ids`` (an imported trajectory; the update's benchmarks). ``limit`` 0:
        exactly its length."""
        length = len(prompt_ids) + sum(len(t.sampled_ids) + len(t.observation_ids) for t in turns)
        trajectory = cls.start(prompt_ids, [], limit=limit or length + 1)
        for turn in turns:
            observation, turn.observation_ids = turn.observation_ids, []
            trajectory.add_turn(turn)
            if observation:
                trajectory.add_observation([], observation, reserve=0)
        return trajectory

    @property
    def done(self) -> bool:
        return bool(self.end_reason)

    def room(self) -> int:
        """Ids that may still be appended."""
        return self.limit - len(self.ids)

    def add_turn(self, turn: AgentTurn) -> None:
        """Append a sampled turn (mask 1 on every sampled id).

        Raises:
            ValueError: ids and log-probs differ in length, or they pass the limit.
        """
        if len(turn.sampled_ids) != len(turn.logprobs):
            raise ValueError("a turn's sampled ids and log-probs must have the same length")
        if len(turn.sampled_ids) > self.room():
            raise ValueError(f"{len(turn.sampled_ids)} sampled ids; room for {self.room()}")
        self.ids += turn.sampled_ids
        self.mask += [1] * len(turn.sampled_ids)
        self.logprobs += turn.logprobs
        self.turns.append(turn)
        self.messages.append(turn.message)

    def add_observation(
        self, messages: list[dict], observation_ids: list[int], *, reserve: int
    ) -> bool:
        """Append the environment's answer to the last turn (mask 0), if it leaves ``reserve``
        ids of room for the next turn; otherwise drop it and end ``truncated``.

        Returns:
            True when appended.
        """
        if len(observation_ids) + reserve > self.room():
            self.end_reason = TRUNCATED
            return False
        self.ids += observation_ids
        self.mask += [0] * len(observation_ids)
        self.logprobs += [0.0] * len(observation_ids)
        self.turns[-1].observation_ids = list(observation_ids)
        self.messages += [dict(m) for m in messages]
        return True

    def end(self, reason: str) -> None:
        """End it with ``reason`` (one of :data:`END_REASONS`) unless it ended already."""
        if reason not in END_REASONS:
            raise ValueError(f"unknown end reason {reason!r}; known: {END_REASONS}")
        self.end_reason = self.end_reason or reason

    def sequence_and_mask(self) -> tuple[list[int], list[int]]:
        """The trained sequence and its loss mask (1 on sampled ids only), equal lengths."""
        return list(self.ids), list(self.mask)
