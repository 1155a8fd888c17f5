"""What a rollout, a grading and a detector need of a task version, detached from the database,
and the one step that makes it from a :class:`~tasks_library.models.TaskVersion`
(:func:`task_spec_of`).

It imports no torch, no run config and no rollout, so the monitors and the detectors that rebuild
a task from a stored trajectory take it without loading the rollout machinery, and the library's
own graders (``evaluation``) build their requests through it. ``training.rollout`` re-exports
:class:`TaskSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sandboxes.process import Limits
from sandboxes.repository import RepositoryTests
from sandboxes.suites import harness
from tasks_library.environments import environment_request
from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_content
from tasks_library.terminal.library import terminal_task_of
from tasks_library.terminal.state import TerminalSpec, terminal_spec


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
    # The task version's reference (baselines for rewards and detectors).
    reference_solution: str = ""
    setup_code: str = ""  # the suite's setup code, run before the tests (python-check)
    # The request field of the task version's built environment (sandboxes.environments);
    # None: the host's bare runtime.
    environment: dict | None = None
    # The fresh inputs added to hidden_tests for this grading (training/fresh_tests.py); empty:
    # the task version's fixed tests.
    fresh_tests: dict = field(default_factory=dict)
    # The task family: "function" (prompt, entry point, check-style tests) or "repository"
    # (files: the workspace as bytes, prompt: the problem statement, repository: its tests).
    kind: str = "function"
    repository: RepositoryTests | None = None
    # A terminal task (kind "terminal"): its state, state directories, services, verifier.
    terminal: TerminalSpec | None = None

    def request(self, code: str, tests: str, *, files: dict | None = None) -> dict:
        """The sandbox request that runs ``code`` on ``tests`` (the visible or the hidden suite)
        in this task's harness, limits, setup and environment, beside ``files`` (None: the
        task's own)."""
        return harness(self.harness).request(
            code,
            tests,
            self.entry_point,
            prompt=self.prompt,
            limits=task_limits(self),
            files=self.files if files is None else files,
            setup=self.setup_code,
            environment=self.environment,
        )

    @property
    def runtime(self) -> str:
        """The sandbox queue that grades it (the environment's, else the harness's)."""
        return (self.environment or {}).get("queue") or harness(self.harness).runtime


def task_limits(task: TaskSpec) -> Limits:
    """The sandbox limits of one execution of ``task`` (its time limit and per-test limit)."""
    return Limits(
        wall_timeout_s=task.timeout_s,
        cpu_s=int(task.timeout_s) + 1,
        test_timeout_s=task.test_timeout_s,
    )


def task_spec_of(version: TaskVersion) -> TaskSpec:
    """What a rollout needs of task ``version``, detached from the database: a function task's
    prompt, entry point, suites, limits, setup, files and environment; a repository task's
    workspace files, problem statement, reference patch and tests (``kind="repository"``); a
    terminal task's instruction, reference script and :class:`TerminalSpec`
    (``kind="terminal"``).

    Reads ``version.test_suite`` and ``version.environment`` (select them with the version to
    save two queries per version).

    Raises:
        EnvironmentUnavailable: the version's environment is not built and cannot be
            (:func:`tasks_library.environments.environment_request` builds it on first use).
    """
    if version.is_terminal:
        spec = terminal_spec(terminal_task_of(version))
        return TaskSpec(
            task_version_id=version.pk,
            prompt=version.prompt,
            entry_point="",
            visible_tests="",
            hidden_tests="",
            timeout_s=spec.verifier_timeout_s,
            harness=version.test_suite.harness,
            reference_solution=version.reference_solution,
            environment=environment_request(version.environment),
            kind="terminal",
            terminal=spec,
        )
    if version.is_repository:
        content = repository_content(version)
        return TaskSpec(
            task_version_id=version.pk,
            prompt=content.problem_statement,
            entry_point="",
            visible_tests="",
            hidden_tests="",
            timeout_s=content.timeout_s,
            harness=version.test_suite.harness,
            files=content.files,
            reference_solution=content.reference_patch,
            environment=environment_request(version.environment),
            kind="repository",
            repository=content.tests(),
        )
    suite = version.test_suite
    return TaskSpec(
        task_version_id=version.pk,
        prompt=version.prompt,
        entry_point=version.entry_point,
        visible_tests=suite.visible_tests,
        hidden_tests=suite.hidden_tests,
        timeout_s=suite.timeout_s,
        harness=suite.harness,
        files=version.files,
        test_timeout_s=suite.test_timeout_s,
        reference_solution=version.reference_solution,
        setup_code=suite.setup_code,
        environment=environment_request(version.environment),
    )
