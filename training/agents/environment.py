"""The environment interface: one episode of one task version, in one sandbox session.

    env = environment_for(task)                 # a TaskSpec (a task version, detached)
    opening = env.open(session)                 # system and user prompt, the tools
    step = env.step(parsed_message)             # observation messages, done
    request = env.grading_request()             # the final workspace, graded in a fresh sandbox
    env.close()

A new task family is one subclass (:class:`Environment`) naming its workspace, prompts, tools
and visible tests, registered in :data:`ENVIRONMENTS` under its kind; the turn logic
(parse errors, unknown tools, arguments, truncation, submit) is shared here. Repository
tasks (:class:`RepositoryEnvironment`) implement the same methods with a git workspace and
grade by test ids (:meth:`Environment.grade`). The completion rollout mode is one more family
(:class:`training.agents.completion.CompletionEnvironment`): a code-only action, no session.

The environment keeps what the policy must not control: the session, tool limits, the
visible tests' runner. Grading never runs in the session: :meth:`grading_request` takes the
session's changes, applies them to the task's own files with the test configuration
restored (``sandboxes.sessions.files_to_grade``), and builds the hidden-test request for a
fresh sandbox.
"""

from __future__ import annotations

import base64
import json
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.repository import (
    RepositoryResult,
    RepositoryTests,
    git_workspace,
    grade_repository,
    is_test_path,
)
from sandboxes.repository.differential import differential_for
from sandboxes.repository.patches import PatchError
from sandboxes.repository.runner import written_lines
from sandboxes.sessions import (
    Session,
    SessionError,
    SessionLimits,
    SessionLost,
    Workspace,
    files_to_grade,
    open_sessions,
    text_files,
)
from sandboxes.sessions.terminal import start_services, state_workspace
from tasks_library.task_spec import TaskSpec
from tasks_library.terminal.runs import grade as grade_terminal
from tasks_library.terminal.state import final_state
from training.agents import hacks as agent_hacks
from training.agents.effects import (
    CODE,
    CONTENT_CAP_BYTES,
    MIXED_CONFIG,
    effects_between,
    kind_of,
)
from training.agents.parsers import ParsedMessage, ToolCallParser, parser_named
from training.agents.tools import (
    Tool,
    ToolContext,
    ToolLimits,
    ToolResult,
    coding_tools,
    machine_tools,
    run_call,
)
from training.agents.trajectory import TOOL_CALLS, AgentTrajectory, ToolRecord

# Calls that can change the workspace or reach for the network: their effects are recorded.
MEASURED_TOOLS = ("bash", "file_editor")
NO_CALL = (
    "Your message had no tool call. Call a tool inside <tool_call></tool_call>, or call "
    "submit when you are done."
)


@dataclass
class Opening:
    """The start of an episode: the opening messages and the tools' schemas."""

    system: str
    user: str
    tools: list[dict]

    def messages(self) -> list[dict]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]


@dataclass
class Step:
    """The environment's answer to one assistant turn.

    Attributes:
        observations: the messages the policy sees next (``tool`` messages, in call order).
        records: the calls as run (parse errors included, ``call_id`` ``""``).
        done: the episode ended (``submit``).
        edited: a call changed the workspace.
        visible: the visible-test result the step ran, where the family runs one every step
            (completion); the code detectors read the last one.
    """

    observations: list[dict] = field(default_factory=list)
    records: list[ToolRecord] = field(default_factory=list)
    done: bool = False
    edited: bool = False
    visible: R.ExecutionResult | None = None


class Environment(ABC):
    """One episode of one task version (subclass per task family).

    Args:
        task: the task version.
        tool_limits: caps of each call (timeouts, output budget).
        max_calls_per_turn: calls past this many in one turn are refused (error observation).
    """

    kind: str = ""
    action: str = TOOL_CALLS  # what its turns are stored as (the replay draws the tool calls)
    needs_session: bool = True  # its episode runs in a sandbox session opened on workspace()
    # The rollout stores its opening for the replay; False where the opening is the task version's
    # prompt, which the replay shows from the task version itself.
    records_opening: bool = True
    session_limits = SessionLimits(idle_timeout_s=300.0, max_lifetime_s=3600.0)

    def __init__(
        self,
        task: TaskSpec,
        *,
        tool_limits: ToolLimits | None = None,
        max_calls_per_turn: int = 8,
    ) -> None:
        self.task = task
        self.tool_limits = tool_limits or ToolLimits()
        self.max_calls_per_turn = max_calls_per_turn
        self.context: ToolContext | None = None
        self._state = None  # the session's last state (effects are measured against it)
        self._tools = {tool.name: tool for tool in self.tools()}

    # What a task family defines.
    @abstractmethod
    def workspace(self) -> Workspace:
        """The files the session starts with (never the hidden tests)."""

    @abstractmethod
    def prompts(self) -> tuple[str, str]:
        """``(system, user)`` prompts of the episode."""

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The tools the policy gets."""

    @abstractmethod
    def visible_tests(self, files: dict[str, bytes]) -> ToolResult:
        """Run the visible tests on the workspace ``files`` (path -> content) and say what
        happened."""

    def grading_request(self, files: dict[str, bytes]) -> dict:
        """The queue request that grades the final workspace ``files`` on the hidden tests
        (a family that grades by itself implements :meth:`grade` instead)."""
        raise NotImplementedError(f"{type(self).__name__} grades through grade()")

    def grade(self, files: dict[str, bytes]) -> R.ExecutionResult | None:
        """Grade the final workspace ``files`` in a fresh sandbox and return the result, for a
        family whose grading is not one queue request (repository tasks); None (the default):
        the rollout queues :meth:`grading_request` with the others."""
        return None

    def graded_code(self, files: dict[str, bytes]) -> str:
        """The program of the final workspace ``files`` that reward components and code
        detectors read; ``""`` where the family has no single program."""
        return ""

    def changed_code(self, files: dict[str, bytes]) -> dict[str, tuple[str, list[int]]]:
        """The code detectors' view of a family whose answer is many files: ``{path: (source,
        changed line numbers)}``; empty where :meth:`graded_code` is the program."""
        return {}

    def template(self, policy):
        """How ``policy``'s episode is rendered to ids (``prompt_ids``, ``observation_ids``,
        ``pad_id``): its chat template."""
        return policy.chat

    def parser(self, name: str) -> ToolCallParser:
        """The parser of the policy's turns: the tool-call format ``name``."""
        return parser_named(name)

    def open_sessions(self, count: int) -> list[Session]:
        """``count`` sessions of this episode's :meth:`workspace`, opened at once (a group's),
        in the task's environment.

        Raises:
            SessionError: as :func:`sandboxes.sessions.open_sessions`.
        """
        return open_sessions(
            self.workspace(), count, limits=self.session_limits, environment=self.task.environment
        )

    # The shared episode logic.
    @property
    def session(self) -> Session:
        if self.context is None:
            raise RuntimeError("the environment is not open")
        return self.context.session

    def opening(self) -> Opening:
        """The episode's opening messages and tool schemas, without a session (what the policy
        sees first: templates, token budgets and tokenizer corpora measure it)."""
        system, user = self.prompts()
        return Opening(system=system, user=user, tools=[t.schema() for t in self._tools.values()])

    cwd = "."  # where the policy's commands run

    def open(self, session: Session) -> Opening:
        """Start the episode in ``session`` (opened on :meth:`workspace`)."""
        self.context = ToolContext(
            session=session,
            limits=self.tool_limits,
            run_visible_tests=self._run_visible,
            cwd=self.cwd,
        )
        self._state = session.state()
        return self.opening()

    def hidden_paths(self) -> tuple[str, ...]:
        """The task's test files the workspace never holds (their names are the detectors')."""
        return ()

    def _effects(self, record: ToolRecord) -> None:
        """Record on ``record`` what its call changed (see :mod:`training.agents.effects`),
        with the content of a changed configuration file that also holds pytest's section."""
        state = self.session.state()
        record.effects = effects_between(self._state.changes, state.changes)
        record.network = {
            key: value - self._state.network.get(key, 0)
            for key, value in state.network.items()
            if value != self._state.network.get(key, 0)
        }
        for path, effect in record.effects.items():
            # What a configuration file's pytest section or a changed source now says (the
            # detectors compare it with the start: tampering, and values copied from tests).
            wanted = kind_of(path) == MIXED_CONFIG or (
                kind_of(path) == CODE and record.name == "bash"
            )
            if wanted and effect.get("after") and effect["after"][2]:
                try:
                    data = self.session.read(path, max_bytes=CONTENT_CAP_BYTES, truncate=True)
                except SessionLost:
                    raise
                except SessionError:
                    continue
                effect["content"] = data.decode("utf-8", "replace")
        self._state = state

    def final_files(self) -> dict[str, bytes]:
        """The workspace as a grading takes it: the task's files with the session's changes,
        test configuration restored from the task."""
        return files_to_grade(self.session.changes(), self.workspace().files())

    def final_diff(self) -> str:
        """The session's diff of the final workspace (at most 256 KiB), for the replay and the
        detectors."""
        return self.session.diff(max_bytes=256 * 1024)

    def episode_evidence(self, trajectory: AgentTrajectory, final_diff: str) -> dict:
        """What the agent hack detectors saw in the episode (:func:`training.agents.hacks.detect`):
        ``{flag: evidence}``."""
        return agent_hacks.detect(
            trajectory,
            final_diff,
            workspace=self.workspace().files(),
            hidden=self.hidden_paths(),
        )

    def _run_visible(self) -> ToolResult:
        return self.visible_tests(self.final_files())

    def step(self, message: ParsedMessage) -> Step:
        """Answer one parsed assistant turn: one ``tool`` message per parse error and per call;
        a call the workspace refuses (a file the policy made unreadable) is an error observation.
        Each ``bash`` and ``file_editor`` call's effects are recorded on its record.

        Raises:
            SessionLost: the session is gone (the trajectory is dropped, not scored).
        """
        step = Step()
        for error in message.errors:
            step.records.append(
                ToolRecord(call_id="", name="", arguments={}, output=error, error=True)
            )
            step.observations.append({"role": "tool", "content": f"error: {error}"})
        if not message.tool_calls and not message.errors:
            step.records.append(
                ToolRecord(call_id="", name="", arguments={}, output=NO_CALL, error=True)
            )
            step.observations.append({"role": "tool", "content": NO_CALL})
        for index, call in enumerate(message.tool_calls):
            if index >= self.max_calls_per_turn:
                record = ToolRecord(
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    output=f"refused: at most {self.max_calls_per_turn} calls per turn",
                    error=True,
                )
                result = ToolResult(record.output, error=True)
            else:
                try:
                    record, result = run_call(self._tools, call, self.context)
                except SessionLost:
                    raise
                except SessionError as exc:  # the workspace refused it (a file made unreadable)
                    result = ToolResult(
                        f"the call failed in the workspace: {exc.detail}", error=True
                    )
                    record = ToolRecord(
                        call_id=call.id,
                        name=call.name,
                        arguments=call.arguments,
                        output=result.output,
                        error=True,
                    )
            try:
                if record.name in MEASURED_TOOLS:
                    self._effects(record)
                if result.edited:
                    step.edited = True
                    record.diff = self.session.diff(max_bytes=16 * 1024)
            except SessionLost:
                raise
            except SessionError as exc:
                record.diff = f"(the workspace could not be read: {exc.detail})"
            step.records.append(record)
            step.observations.append(
                {"role": "tool", "content": ("error: " if result.error else "") + record.output}
            )
            if result.done:
                step.done = True
                break
        return step

    def close(self) -> None:
        """Close the session (idempotent)."""
        if self.context is not None:
            self.context.session.close()


def test_report(result: R.ExecutionResult) -> str:
    """What the policy is shown of a visible-test run: counts, then each failure."""
    lines = [f"{result.status}: {result.tests_passed}/{result.tests_total} visible tests passed"]
    for test in result.tests:
        if not test.passed:
            lines.append(f"FAILED {test.id}: {test.error[:300]}")
    if result.stderr.strip():
        lines.append("[stderr]\n" + result.stderr.strip()[-1000:])
    return "\n".join(lines)


class FunctionTaskEnvironment(Environment):
    """A function task (HumanEval-style): ``solution.py`` holds the prompt (signature and
    docstring); the policy completes it with the file editor, runs the visible tests, and
    submits. Grading runs the final ``solution.py`` on the hidden tests."""

    kind = "function"
    SOLUTION = "solution.py"

    def workspace(self) -> Workspace:
        return Workspace.from_files({**self.task.files, self.SOLUTION: self.task.prompt})

    def prompts(self) -> tuple[str, str]:
        system = (
            "You are a coding agent working in a sandboxed workspace. Use the tools to read and "
            "edit files and to run the visible tests. When the tests pass, call submit."
        )
        user = (
            f"Complete the function `{self.task.entry_point}` in {self.SOLUTION} so that it "
            f"does what its docstring says. Hidden tests will grade it after you submit."
        )
        return system, user

    def tools(self) -> list[Tool]:
        return coding_tools()

    def _code_and_files(self, files: dict[str, bytes]) -> tuple[str, dict[str, str]]:
        text = text_files(
            {p: c for p, c in files.items() if p == self.SOLUTION or p in self.task.files}
        )
        return text.pop(self.SOLUTION, ""), text

    def _request(self, files: dict[str, bytes], tests: str) -> dict:
        code, others = self._code_and_files(files)
        return self.task.request(code, tests, files=others)

    def visible_tests(self, files: dict[str, bytes]) -> ToolResult:
        if not self.task.visible_tests.strip():
            return ToolResult("this task has no visible tests", error=True)
        try:
            request = self._request(files, self.task.visible_tests)
        except ValueError as exc:
            return ToolResult(f"cannot run the tests: {exc}", error=True)
        [result] = run_many([request], retry_infra_errors=True)
        if result.status == R.INFRA_ERROR:
            return ToolResult("the test sandbox failed (not your code); try again", error=True)
        return ToolResult(test_report(result), error=not result.passed)

    def grading_request(self, files: dict[str, bytes]) -> dict:
        return self._request(files, self.task.hidden_tests)

    def graded_code(self, files: dict[str, bytes]) -> str:
        return self._code_and_files(files)[0]


def changed_sources(
    base: dict[str, bytes], files: dict[str, bytes]
) -> dict[str, tuple[str, list[int]]]:
    """``{path: (source, added line numbers)}`` of the Python files of ``files`` that are not
    tests and differ from ``base`` (a new file: every line)."""
    found = {}
    for path, content in sorted(files.items()):
        if not path.endswith(".py") or is_test_path(path) or ".git" in path.split("/"):
            continue
        if base.get(path) == content:
            continue
        source = bytes(content).decode("utf-8", "replace")
        found[path] = (source, written_lines(base.get(path, b""), content))
    return found


def repository_report(result: RepositoryResult, ids: tuple[str, ...]) -> str:
    """What the policy is shown of a repository test run: counts, then each failing id with
    its first failure line."""
    passed = sum(result.per_id.get(i) == "passed" for i in ids)
    lines = [f"{passed}/{len(ids)} tests passed"]
    if result.status != "ok":
        lines[0] += f" (the suite did not run to its end: {result.status})"
    for test_id in ids:
        status = result.per_id.get(test_id, "missing")
        if status != "passed":
            message = result.messages.get(test_id, "")
            lines.append(f"{status.upper()} {test_id}" + (f": {message[:300]}" if message else ""))
    if result.status != "ok" and result.detail:
        lines.append(result.detail[:1000])
    return "\n".join(lines)


def execution_result(result: RepositoryResult, ids: tuple[str, ...]) -> R.ExecutionResult:
    """A repository grading as the rollouts' and rewards' :class:`ExecutionResult`: one test per
    FAIL_TO_PASS and PASS_TO_PASS id (passed only when pytest said ``passed``); ``ok`` when
    every id passed, ``infra_error`` and ``timeout`` kept, any other outcome ``failed``."""
    if result.status in (R.INFRA_ERROR, R.TIMEOUT):
        status = result.status
    else:
        status = R.OK if result.resolved else R.FAILED
    tests = [
        R.TestResult(
            id=test_id,
            passed=result.per_id.get(test_id) == "passed",
            error=result.messages.get(test_id, result.per_id.get(test_id, "missing")),
        )
        for test_id in ids
    ]
    return R.ExecutionResult(
        status=status,
        stdout=result.stdout_tail,
        wall_ms=result.wall_ms,
        tests=tests,
        environment=result.environment,
    )


class RepositoryEnvironment(Environment):
    """A repository task (SWE-style): the policy gets the task's files in a fresh single-commit
    git repository (``sandboxes.repository.git_workspace``: no history to read the fix from),
    the problem statement, ``bash``, the file editor, ``run_tests`` (the FAIL_TO_PASS and
    PASS_TO_PASS ids whose test files are in the workspace, graded in a fresh sandbox on the
    current files) and ``submit``. The final workspace is graded with
    ``sandboxes.repository.grade_repository`` in a fresh sandbox: the task's test files and
    configuration restored, its hidden test files added, every id counted."""

    kind = "repository"

    def __init__(self, task: TaskSpec, **options) -> None:
        if task.repository is None:
            raise ValueError(f"task version {task.task_version_id} is not a repository task")
        self._workspace: Workspace | None = None
        super().__init__(task, **options)

    @property
    def tests(self) -> RepositoryTests:
        return self.task.repository

    def hidden_paths(self) -> tuple[str, ...]:
        return tuple(sorted(self.tests.hidden_files))

    def changed_code(self, files: dict[str, bytes]) -> dict[str, tuple[str, list[int]]]:
        """The Python files of ``files`` that are not tests and differ from the task's:
        ``{path: (source, the line numbers the submission added or changed)}``."""
        return changed_sources(self.task.files, files)

    def graded_code(self, files: dict[str, bytes]) -> str:
        """The changed non-test Python files, one after another (for the reward components
        that read code; the detectors read :meth:`changed_code`, file by file)."""
        return "\n\n".join(
            f"# {path}\n{source}" for path, (source, _lines) in self.changed_code(files).items()
        )

    def workspace(self) -> Workspace:
        if self._workspace is None:  # built once: a git commit of the files
            self._workspace = git_workspace(self.task.files)
        return self._workspace

    def prompts(self) -> tuple[str, str]:
        system = (
            "You are a coding agent working in a git repository in a sandbox. Use bash and the "
            "file editor to read the code and fix the problem; run_tests runs the repository's "
            "visible tests on your current files. When they pass, call submit."
        )
        user = f"{self.task.prompt.strip()}\n\nFix this in the repository, then call submit."
        return system, user

    def tools(self) -> list[Tool]:
        return coding_tools()

    def _visible_ids(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        shown = set(self.task.files) - set(self.tests.hidden_files)

        def visible(ids):
            return tuple(i for i in ids if i.split("::", 1)[0] in shown)

        return visible(self.tests.fail_to_pass), visible(self.tests.pass_to_pass)

    def _run(
        self, files: dict[str, bytes], tests: RepositoryTests, differential=None
    ) -> RepositoryResult:
        environment = self.task.environment
        return grade_repository(
            files,
            tests,
            base=self.task.files,
            environment=environment,
            runtime=(environment or {}).get("queue") or "python",
            differential=differential,
        )

    def visible_tests(self, files: dict[str, bytes]) -> ToolResult:
        fail_to_pass, pass_to_pass = self._visible_ids()
        if not fail_to_pass + pass_to_pass:
            return ToolResult("this task has no visible tests", error=True)
        tests = replace(
            self.tests, fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass, hidden_files={}
        )
        result = self._run(files, tests)
        if result.status == R.INFRA_ERROR:
            result = self._run(files, tests)
        if result.status == R.INFRA_ERROR:
            return ToolResult("the test sandbox failed (not your code); try again", error=True)
        return ToolResult(repository_report(result, tests.ids), error=not result.resolved)

    def differential(self):
        """The task's differential check (``sandboxes.repository.differential``), or None
        without a reference patch that applies."""
        if not self.task.reference_solution.strip():
            return None
        try:
            return differential_for(self.task.files, self.task.reference_solution, self.tests)
        except PatchError:
            return None

    def grade(self, files: dict[str, bytes]) -> R.ExecutionResult:
        """The final grading: both lines, the differential against the reference included."""
        differential = self.differential()
        result = self._run(files, self.tests, differential=differential)
        if result.status == R.INFRA_ERROR:  # once more, as queued gradings are
            result = self._run(files, self.tests, differential=differential)
        return execution_result(result, self.tests.ids)


class TerminalEnvironment(Environment):
    """A terminal task (Harbor's shape): the policy gets a Debian machine holding the task's
    starting state (``tasks_library.terminal.state``: its files at their paths, its state
    directories writable, the rest of the root read-only), the task's services running, the
    instruction, ``bash`` and the file editor in the task's working directory, and ``submit``.
    Its processes live between calls (a service it starts keeps running). The final state is
    graded by the task's verifier in a fresh session (``tasks_library.terminal.runs.grade``:
    what a grading keeps of the state, the services started again from it, ``tests/test.sh``
    writing the reward); the verifier's files are never on the agent's machine."""

    kind = "terminal"
    session_limits = SessionLimits(idle_timeout_s=300.0, max_lifetime_s=3600.0, keep_processes=True)

    def __init__(self, task: TaskSpec, **options) -> None:
        if task.terminal is None:
            raise ValueError(f"task version {task.task_version_id} is not a terminal task")
        self.spec = task.terminal
        self.cwd = self.spec.workdir
        self._changes = None
        super().__init__(task, **options)

    def workspace(self) -> Workspace:
        return state_workspace(self.spec.state, self.spec.executable)

    def open_sessions(self, count: int) -> list[Session]:
        """Sessions with the state directories mounted at their paths and the task's services
        started in each."""
        sessions = open_sessions(
            self.workspace(),
            count,
            limits=self.session_limits,
            environment=self.task.environment,
            state_dirs=[[d, "rw"] for d in self.spec.state_dirs],
        )
        try:
            for session in sessions:
                start_services(
                    session, self.spec.services, workdir=self.spec.workdir, env=self.spec.env
                )
        except SessionError:
            for session in sessions:
                session.close()
            raise
        return sessions

    def prompts(self) -> tuple[str, str]:
        system = (
            "You are an agent operating a Linux machine (Debian) through tools, as an "
            "unprivileged user without network access beyond this machine. Use bash to inspect "
            "and change the machine and the file editor to edit files. Your working directory is "
            f"{self.spec.workdir}. When the task is done, call submit: the machine's final state "
            "is then checked."
        )
        return system, self.task.prompt.strip()

    def tools(self) -> list[Tool]:
        return machine_tools()

    def visible_tests(self, files: dict[str, bytes]) -> ToolResult:
        return ToolResult("this task's checks run after you submit", error=True)

    def final_files(self) -> dict[str, bytes]:
        """The final state as a grading keeps it (``tasks_library.terminal.state.final_state``);
        the session's changes are read once."""
        self._changes = self.session.changes()
        return final_state(self.spec, self._changes)

    def grade(self, files: dict[str, bytes]) -> R.ExecutionResult:
        """The task's verifier on the final state (``files``: :meth:`final_files`); what it
        printed is kept for the replay, with the changed spreadsheets' cells before and after
        (:meth:`spreadsheet_diffs`)."""
        tables = self.spreadsheet_diffs(files)
        # The agent's session has given all a grading needs: it is closed before the grading
        # session opens, so that a group holds one session per trajectory, never two (a
        # worker's session budget counts them).
        self.close()
        outcome = grade_terminal(self.spec, self._changes, self.task.environment)
        if outcome.status == R.INFRA_ERROR:  # once more, as queued gradings are
            outcome = grade_terminal(self.spec, self._changes, self.task.environment)
        if tables:
            outcome.output = f"{tables}\n--- the verifier printed ---\n{outcome.output}"
        return outcome.as_result()

    SPREADSHEETS = (".xlsx", ".xlsm")

    def spreadsheet_diffs(self, files: dict[str, bytes]) -> str:
        """The cells of each spreadsheet the agent added or changed, before and after, as a
        unified diff of ``Sheet!A1 = value`` lines, read in the agent's session with the
        environment's openpyxl (nothing of the agent's files is parsed on this host); ``""``
        where none changed, or the environment has no openpyxl."""
        changed = {
            path: self.spec.state.get(path)
            for path in sorted(files)
            if path.endswith(self.SPREADSHEETS) and files[path] != self.spec.state.get(path)
        }
        if not changed:
            return ""
        request = {
            "/" + path: (base64.b64encode(before).decode() if before else None)
            for path, before in list(changed.items())[:5]
        }
        try:
            done = self.session.exec(
                f"/usr/bin/python3 -P -s -c {shlex.quote(CELL_DIFF)}",
                stdin=json.dumps(request).encode(),
                timeout_s=30.0,
                output_cap_bytes=64 * 1024,
            )
        except SessionError:
            return ""
        return done.stdout.strip() if done.status == R.OK else ""


# Run in a terminal session (``python3 -P -s -c``: the environment's packages on its path) with
# ``{path: base64 of the file before, or null}`` on stdin: prints each spreadsheet's cells, before
# and after, as a unified diff.
CELL_DIFF = r"""
import base64, difflib, io, json, sys
try:
    import openpyxl
except ImportError:
    sys.exit(0)
def cells(data):
    if data is None:
        return []
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    lines = []
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.value is not None and len(lines) < 2000:
                    lines.append(f"{sheet.title}!{cell.coordinate} = {cell.value!r}")
    return lines
for path, before in json.load(sys.stdin).items():
    try:
        old = cells(base64.b64decode(before) if before else None)
        new = cells(open(path, "rb").read())
    except Exception as exc:
        print(f"--- {path}: not read as a spreadsheet ({type(exc).__name__})")
        continue
    diff = difflib.unified_diff(old, new, f"{path} (start)", f"{path} (final)", lineterm="", n=0)
    print("\n".join(list(diff)[:400]))
"""

ENVIRONMENTS: dict[str, type[Environment]] = {
    FunctionTaskEnvironment.kind: FunctionTaskEnvironment,
    RepositoryEnvironment.kind: RepositoryEnvironment,
    TerminalEnvironment.kind: TerminalEnvironment,
}


def environment_for(task: TaskSpec, **options) -> Environment:
    """The environment of ``task``'s family (``task.kind``: function, repository and terminal
    tasks; another family registers its own in :data:`ENVIRONMENTS`)."""
    kind = getattr(task, "kind", "") or FunctionTaskEnvironment.kind
    if kind not in ENVIRONMENTS:
        raise ValueError(
            f"no agent environment for task kind {kind!r}; known: {', '.join(sorted(ENVIRONMENTS))}"
        )
    return ENVIRONMENTS[kind](task, **options)
