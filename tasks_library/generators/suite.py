"""A project's test suite run in the sandbox, with a result and a failure line per pytest id.

Every run goes through the repository grader's own runner (``sandboxes.repository.
run_suite_report``): a fresh sandbox session per run, the results read by a reporter loaded from
outside the workspace and cross-checked, so the generator measures FAIL_TO_PASS and
PASS_TO_PASS exactly the way a grading will read them. The project is untrusted code from an
index: it only ever runs there.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from sandboxes.repository import RepositoryRunError, run_suite_report


@dataclass
class SuiteRun:
    """One run of the suite (or of some of its modules).

    Attributes:
        status: ``ok`` (pytest ran to its end), ``timeout``, ``infra_error`` (the sandbox), or
            ``failed`` (it did not run to its end, or its report was not trustworthy).
        results: every collected node id -> ``passed``, ``failed``, ``error``, ``skipped``,
            ``xfailed``, ``xpassed``; a module that failed to collect -> ``error``.
        messages: node id -> the first line of its first failure (``AssertionError: ...``).
        seconds: wall time of the run; detail: why it did not run, when it did not.
    """

    status: str
    results: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str = ""

    def passed(self) -> set[str]:
        return {i for i, outcome in self.results.items() if outcome == "passed"}


class ProjectSuite:
    """A project's pristine files and how its suite runs; :meth:`run` runs it with some
    modules changed.

    Args:
        files: the pristine project, ``{path: bytes}``.
        environment: the built environment (``environment_request``), with pytest in it.
        test_command: ``pytest`` and its options (the tasks' own test command).
    """

    def __init__(self, files: dict[str, bytes], *, environment: dict, test_command: str) -> None:
        self.files = files
        self.environment = environment
        self.test_command = test_command

    def run(
        self,
        *,
        changed: dict[str, bytes] | None = None,
        targets: Iterable[str] = (),
        timeout_s: float = 300.0,
    ) -> SuiteRun:
        """Run pytest on ``targets`` (test modules; the whole suite when empty) over the
        pristine files with ``changed`` (``{path: bytes}``) written over them."""
        files = {**self.files, **(changed or {})}
        command = shlex.join([*shlex.split(self.test_command), *targets])
        started = time.monotonic()
        try:
            report = run_suite_report(
                files, test_command=command, environment=self.environment, timeout_s=timeout_s
            )
        except RepositoryRunError as exc:
            status = exc.status if exc.status in ("timeout", "infra_error") else "failed"
            return SuiteRun(status, seconds=time.monotonic() - started, detail=exc.detail)
        return SuiteRun(
            "ok", dict(report.statuses), dict(report.messages), time.monotonic() - started
        )
