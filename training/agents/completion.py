"""Completion rollouts as one more environment: the policy's whole turn is the code.

The ``completion`` rollout mode (HumanEval-style function tasks, the small default policy of
:mod:`training.policy`) is an :class:`~training.agents.environment.Environment` like the
agent's, with a code-only action: each turn's sampled text is the body that follows the task's
prompt; the step runs ``prompt + text`` on the visible tests in a fresh sandbox (no session:
there is no workspace to keep between turns) and shows the policy what failed, then the
prompt again. A turn whose code passes the visible tests ends the episode. Grading runs the
last turn's code on the hidden tests, as for every other family.

The policy has no chat template: :class:`CompletionTemplate` renders the episode the way
this mode always has, token in and token out,

    [bos] + prompt ids + (sampled ids + [obs] + feedback ids + prompt ids) * turns

with the feedback cut to :data:`OBSERVATION_TEXT_TOKENS` tokens (the re-shown prompt is
whole). verl runs single-turn rollouts as one more agent loop the same way, and verifiers'
SingleTurnEnv is a MultiTurnEnv.
"""

from __future__ import annotations

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.sessions import Session, SessionLost, Workspace
from training.agents.environment import Environment, Opening, Step
from training.agents.parsers import ParsedMessage, ToolCallParser
from training.agents.tools import Tool, ToolResult
from training.agents.trajectory import RUN_CODE, AgentTurn, ToolRecord

OBSERVATION_TEXT_TOKENS = 48
"""Tokens of the visible-test feedback a completion turn is shown (the prompt follows whole)."""


def observation_text(result: R.ExecutionResult) -> str:
    """What the policy is shown after running its code on the visible tests: the counts, each
    failing test's first 120 characters, the last line of stderr."""
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


def run_record(code: str, result: R.ExecutionResult, feedback: str = "") -> ToolRecord:
    """The record of program ``code`` run on the visible tests with ``result``: the feedback
    shown (default :func:`observation_text`) and the result itself, for the replay."""
    return ToolRecord(
        call_id="",
        name=RUN_CODE,
        arguments={"code": code},
        output=feedback or observation_text(result),
        error=not result.passed,
        seconds=result.wall_ms / 1000,
        result=result.to_dict(),
    )


def completion_turn(
    index: int,
    sampled_ids: list[int],
    logprobs: list[float],
    *,
    text: str,
    code: str,
    result: R.ExecutionResult,
    feedback: str = "",
    stopped: bool = True,
) -> AgentTurn:
    """A completion turn as the rollout records it: the policy's ``text`` (sampled as
    ``sampled_ids`` with their ``logprobs``) and the run of the program ``code`` it made
    (:func:`run_record`)."""
    return AgentTurn(
        index=index,
        sampled_ids=sampled_ids,
        logprobs=logprobs,
        text=text,
        stopped=stopped,
        message={"role": "assistant", "content": text},
        tools=[run_record(code, result, feedback)],
        action=RUN_CODE,
    )


class CompletionTemplate:
    """The completion policy's rendering of an episode (what a chat template is to an agent
    policy): ``prompt_ids`` and ``observation_ids`` over OpenAI-style messages.

    Args:
        policy: a :class:`training.policy.Policy` (``encode``, ``bos_id``, ``obs_id``,
            ``pad_id``).
    """

    def __init__(self, policy) -> None:
        self.policy = policy

    @property
    def pad_id(self) -> int:
        return self.policy.pad_id

    def prompt_ids(self, messages: list[dict], *, tools: list[dict] | None = None) -> list[int]:
        """``[bos]`` and the user message's ids (the task's prompt); the system message is
        empty in this mode."""
        user = next(m["content"] for m in messages if m["role"] == "user")
        return [self.policy.bos_id, *self.policy.encode(user)]

    def observation_ids(self, messages: list[dict], *, closed: bool = True) -> list[int]:
        """``[obs]``, each tool message's first :data:`OBSERVATION_TEXT_TOKENS` ids, each user
        message whole (``closed`` is unused: a completion turn needs no closing token)."""
        ids = [self.policy.obs_id]
        for message in messages:
            encoded = self.policy.encode(message["content"])
            ids += encoded[:OBSERVATION_TEXT_TOKENS] if message["role"] == "tool" else encoded
        return ids


class CodeParser(ToolCallParser):
    """A completion turn's text is its content: there are no tool calls to find."""

    name = "code"

    def parse(self, text: str) -> ParsedMessage:
        return ParsedMessage(content=text)


class CompletionEnvironment(Environment):
    """A function task completed in place: each turn's text continues ``task.prompt``; the
    visible tests run on it in a fresh sandbox after every turn.

    The episode needs no session (:attr:`needs_session`): its workspace is the one program,
    kept on the trajectory's turns.
    """

    kind = "completion"
    action = RUN_CODE
    needs_session = False
    records_opening = False  # the opening is the task's prompt, no system prompt and no tools
    SOLUTION = "solution.py"

    def __init__(self, task, **options) -> None:
        """An episode of function task ``task``.

        Raises:
            ValueError: ``task`` is not a function task (a repository task's answer is many
                files: it is rolled out as an agent).
        """
        if task.kind != "function":
            raise ValueError(
                f"task version {task.task_version_id} is a {task.kind} task: completion rollouts "
                f"write one function; roll it out with rollout_mode 'agent'"
            )
        super().__init__(task, **options)
        self.code = ""  # the last turn's program

    def workspace(self) -> Workspace:
        return Workspace.from_files({self.SOLUTION: self.task.prompt})

    def prompts(self) -> tuple[str, str]:
        return "", self.task.prompt

    def tools(self) -> list[Tool]:
        return []

    def template(self, policy) -> CompletionTemplate:
        return CompletionTemplate(policy)

    def parser(self, name: str) -> ToolCallParser:
        return CodeParser()

    def open(self, session: Session | None) -> Opening:
        return self.opening()

    def _run_program(self, code: str) -> R.ExecutionResult:
        """``code`` run on the visible tests in a fresh sandbox (an ``infra_error`` retried
        once)."""
        [result] = run_many(
            [self.task.request(code, self.task.visible_tests)], retry_infra_errors=True
        )
        return result

    def visible_tests(self, files: dict[str, bytes]) -> ToolResult:
        result = self._run_program(files.get(self.SOLUTION, b"").decode("utf-8", "replace"))
        return ToolResult(observation_text(result), error=not result.passed)

    def step(self, message: ParsedMessage) -> Step:
        """Run the turn's program (``task.prompt`` + the turn's text) on the visible tests.

        Raises:
            SessionLost: the sandbox failed twice (the trajectory is dropped, not scored).
        """
        self.code = self.task.prompt + message.content
        result = self._run_program(self.code)
        if result.status == R.INFRA_ERROR:
            raise SessionLost(f"the sandbox running task {self.task.task_version_id} failed")
        record = run_record(self.code, result)
        observations = [
            {"role": "tool", "content": record.output},
            {"role": "user", "content": self.task.prompt},
        ]
        return Step(observations=observations, records=[record], done=result.passed, visible=result)

    def final_files(self) -> dict[str, bytes]:
        return {self.SOLUTION: self.code.encode()}

    def final_diff(self) -> str:
        return ""

    def grading_request(self, files: dict[str, bytes]) -> dict:
        return self.task.request(files[self.SOLUTION].decode(), self.task.hidden_tests)

    def graded_code(self, files: dict[str, bytes]) -> str:
        return files[self.SOLUTION].decode()

    def episode_evidence(self, trajectory, final_diff: str) -> dict:
        """None of the agent detectors' evidence: there are no tool calls; the code detectors
        read :meth:`graded_code` when the rollout is scored."""
        return {}

    def close(self) -> None:
        """Nothing to close: the sandboxes ran one program each."""
