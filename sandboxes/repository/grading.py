"""Grading a repository task: FAIL_TO_PASS and PASS_TO_PASS ids, run in a fresh sandbox session.

:func:`grade_repository` takes the submission's final files (the agent's workspace, or the
task's files with a patch applied) and runs, with no trust in the code under test:

1. the graded tree (``runner.graded_tree``, pure): every test file and test configuration reset
   to the task version's, the hidden test files added, no bytecode, no native module the task
   does not have;
2. one pytest run in a FRESH session of the task's environment (``runner.run_pytest``): a
   non-dumpable supervisor holds the nonce; the pytest process defends pytest's verdict inside
   itself (the first line: an audit hook, the machinery snapshot, comparisons that cannot be
   faked; ``harness/pytest_repository.py``);
3. the report (``report.grading_report``, pure): an id passes only when its setup, call and
   teardown were each reported ``passed``; pytest's exit code is never read; a missing,
   uncollected, skipped, xfailed, xpassed, failing or erroring id fails; cross-checks void the
   whole answer (every id ``error``, ``resolved`` False) and name why: ``report_mismatch``
   (a call raised but was reported passed, or pytest's junit XML tallies otherwise),
   ``pytest_tampered``, ``foreign_plugin``, ``reads_hidden_tests``, ``refused_operation``,
   ``forged_report``; a run that never answered is ``incomplete``, a timeout or an output flood
   fails every id;
4. with a ``differential`` (the final grading of an agent's workspace), the second line
   (``differential.Differential``): the repository's functions the tests call, run in processes
   of the submission, the task and the reference, compared as plain data.

What the code under test can still do inside pytest's process, and what catches each: README,
"Repository grading".
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from sandboxes import result as R
from sandboxes.repository.patches import PatchError, apply_patch
from sandboxes.repository.report import (
    STATUSES,
    RepositoryResult,
    cross_check,
    distrust,
    grading_report,
    id_status,
    statuses_of,
)
from sandboxes.repository.runner import graded_tree, run_pytest

__all__ = [
    "STATUSES",
    "RepositoryResult",
    "RepositoryRunError",
    "RepositoryTests",
    "SuiteReport",
    "grade_patch",
    "grade_repository",
    "id_status",
    "pytest_options",
    "run_suite",
    "run_suite_report",
]

RESERVED_OPTIONS = ("-c", "--config-file", "--rootdir", "--junitxml", "--junit-xml")
PLUGIN_NAME = re.compile(r"^(no:)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class RepositoryRunError(RuntimeError):
    """:func:`run_suite` could not run the suite to its end (``status``: ``timeout``,
    ``failed``, ``infra_error``; ``detail`` says why)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


def pytest_options(test_command: str) -> list[str]:
    """The arguments after ``pytest`` (or ``python -m pytest``) in a test command.

    ``-p NAME`` / ``-pNAME`` may name a plugin module of the environment (``-p
    pytest_asyncio.plugin``), a builtin one (``-p pytester``) or ``no:NAME``: the runner imports
    it before the workspace is on ``sys.path``, so a module the submission planted under that
    name is never the one loaded (plugins are not autoloaded from entry points).

    Raises:
        ValueError: not a pytest command, an option the grading owns (``-c``, ``--rootdir``,
            ``--junitxml``), or a ``-p`` value that is not a module name; named.
    """
    try:
        words = shlex.split(test_command)
    except ValueError as exc:
        raise ValueError(f"test_command {test_command!r}: {exc}") from None
    if words[:1] == ["pytest"]:
        rest = words[1:]
    elif len(words) >= 3 and words[0] in ("python", "python3") and words[1:3] == ["-m", "pytest"]:
        rest = words[3:]
    else:
        raise ValueError(f"test_command {test_command!r} must start with 'pytest'")
    for index, word in enumerate(rest):
        if word.split("=", 1)[0] in RESERVED_OPTIONS:
            raise ValueError(
                f"test_command {test_command!r} sets {word!r}, which the grading sets itself"
            )
        if word.startswith("-p"):
            name = word[2:].lstrip("=") or (rest[index + 1] if index + 1 < len(rest) else "")
            if not PLUGIN_NAME.match(name):
                raise ValueError(
                    f"test_command {test_command!r}: -p needs a plugin module name "
                    f"(or no:NAME), not {name!r}"
                )
    return rest


@dataclass(frozen=True)
class RepositoryTests:
    """How a repository task version is graded.

    Attributes:
        fail_to_pass: pytest node ids (``tests/test_x.py::TestC::test_a[1]``, relative to the
            repository's root) that fail before the fix and must pass after it.
        pass_to_pass: node ids that pass before and must still pass.
        test_files: the task version's test files and test configuration
            (``{path: content}`` of every path :func:`~sandboxes.repository.is_test_path`
            accepts), restored over the submission's.
        hidden_files: test files added only at grading (never in the agent's workspace).
        test_command: ``pytest`` followed by pytest options and paths (``pytest -q tests``);
            a grading runs these arguments plus the ids' files and keeps only the ids.
        timeout_s: wall-clock seconds of the whole pytest run.
    """

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_files: Mapping[str, bytes] = field(default_factory=dict)
    hidden_files: Mapping[str, bytes] = field(default_factory=dict)
    test_command: str = "pytest"
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("fail_to_pass", "pass_to_pass"):
            ids = getattr(self, name)
            if isinstance(ids, str) or not all(isinstance(i, str) and i.strip() for i in ids):
                raise ValueError(f"RepositoryTests.{name} must be a list of non-empty test ids")
            object.__setattr__(self, name, tuple(ids))
        both = sorted(set(self.fail_to_pass) & set(self.pass_to_pass))
        if both:
            raise ValueError(f"test ids in both FAIL_TO_PASS and PASS_TO_PASS: {both[:5]}")
        if not self.fail_to_pass and not self.pass_to_pass:
            raise ValueError("RepositoryTests needs at least one FAIL_TO_PASS or PASS_TO_PASS id")
        pytest_options(self.test_command)
        if isinstance(self.timeout_s, bool) or not (
            isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0
        ):
            raise ValueError(f"RepositoryTests.timeout_s must be positive, not {self.timeout_s!r}")

    @property
    def ids(self) -> tuple[str, ...]:
        return (*self.fail_to_pass, *self.pass_to_pass)


def grade_repository(
    files: Mapping[str, bytes],
    tests: RepositoryTests,
    *,
    base: Mapping[str, bytes] | None = None,
    environment: dict | None = None,
    runtime: str = "python",
    slot: str | None = None,
    differential=None,
    guards: bool = True,
) -> RepositoryResult:
    """Grade a submission's final files against ``tests`` in a fresh sandbox session (see the
    module).

    Args:
        files: the final workspace (``{path: bytes}``), e.g. ``apply_patch(task_files, diff)``
            or the session's files; anything under ``.git`` is dropped.
        tests: the task version's :class:`RepositoryTests`.
        base: the task version's own files: what the submission left unchanged is trusted
            like the environment's code (without it, every non-test file counts as the
            submission's), and its native modules are the only ones kept.
        environment: the task version's built environment
            (``tasks_library.environments.environment_request``); it must hold pytest.
        runtime, slot: the session pool to use (:func:`sandboxes.sessions.open_session`).
        differential: a :class:`~sandboxes.repository.differential.Differential` of the task
            (the second line: the functions the tests call, in processes of the submission,
            the task and the reference, compared as plain data); None: the first line alone.
        guards: the first line's defences inside the pytest process (off only in tests that
            show the second line working alone).

    Returns:
        a :class:`RepositoryResult`; ``infra_error`` when the sandbox failed (retry, never score).

    Raises:
        ValueError: a bad workspace path (named).
    """
    ids = list(tests.ids)
    tree = graded_tree(files, tests.test_files, tests.hidden_files, base)
    present = [m for m in dict.fromkeys(i.split("::", 1)[0] for i in ids) if m in tree.files]
    key = str((environment or {}).get("key", ""))
    if not present:
        return RepositoryResult(
            status="failed",
            per_id=dict.fromkeys(ids, "missing"),
            fail_to_pass=tests.fail_to_pass,
            detail="no test file of any id is in the workspace",
            environment=key,
        )
    started = time.monotonic()
    execution, answer = run_pytest(
        tree,
        tests.test_files,
        trusted=sorted({*tests.test_files, *tests.hidden_files}),
        hidden=sorted(tests.hidden_files),
        args=[*pytest_options(tests.test_command), *present],
        ids=ids,
        environment=environment,
        timeout_s=tests.timeout_s,
        runtime=runtime,
        slot=slot,
        guards=guards,
    )
    result = grading_report(
        ids,
        execution,
        answer,
        fail_to_pass=tests.fail_to_pass,
        timeout_s=tests.timeout_s,
        environment=key,
        wall_ms=(time.monotonic() - started) * 1000.0,
    )
    if differential is not None and result.status == "ok":
        differential.apply(result, tree.files, environment=environment, runtime=runtime)
        result.wall_ms = (time.monotonic() - started) * 1000.0
    return result


def grade_patch(
    base: Mapping[str, bytes],
    patch: str,
    tests: RepositoryTests,
    *,
    environment: dict | None = None,
    runtime: str = "python",
    slot: str | None = None,
) -> RepositoryResult:
    """:func:`grade_repository` of ``base`` (the task version's files) with ``patch`` (a
    git-style unified diff: a reference patch, an agent's ``Session.diff()``) applied; the
    empty patch grades ``base`` itself.

    Returns:
        the grading; a patch that does not apply gives ``status`` ``failed``, every id
        ``error``, the flag ``patch_does_not_apply`` and git's message (naming the file and
        hunk) in ``detail``.
    """
    try:
        final = apply_patch(base, patch)
    except PatchError as exc:
        return RepositoryResult(
            status="failed",
            per_id=dict.fromkeys(tests.ids, "error"),
            fail_to_pass=tests.fail_to_pass,
            detail=str(exc),
            flags=["patch_does_not_apply"],
            environment=str((environment or {}).get("key", "")),
        )
    return grade_repository(
        final, tests, base=base, environment=environment, runtime=runtime, slot=slot
    )


@dataclass(frozen=True)
class SuiteReport:
    """A whole suite's run (:func:`run_suite_report`).

    Attributes:
        statuses: every collected node id -> one of :data:`STATUSES` (all but ``missing``); a
            module that failed to collect appears under its own node id as ``error``.
        messages: node id (a test's or a failed module's) -> the first line of its first
            failure (500 characters at most).
        log_tail: the end of pytest's own output (8 KiB).
    """

    statuses: dict[str, str]
    messages: dict[str, str]
    log_tail: str = ""


def run_suite_report(
    files: Mapping[str, bytes],
    *,
    test_command: str = "pytest",
    environment: dict | None = None,
    timeout_s: float = 300.0,
    runtime: str = "python",
    slot: str | None = None,
) -> SuiteReport:
    """Run a repository's whole suite as it stands (nothing reset: the generator's and the
    validator's own files) in a fresh session, with the grading's runner.

    Raises:
        ValueError: a bad ``test_command`` or workspace path.
        RepositoryRunError: the suite did not run to its end (timeout, crash, no pytest in
            the environment, an untrustworthy report, a lost sandbox: ``status`` says which).
    """
    own = {p: bytes(c) for p, c in files.items() if ".git" not in p.split("/")}
    execution, answer = run_pytest(
        graded_tree(own, own, {}, own),
        own,
        trusted=sorted(own),
        args=pytest_options(test_command),
        ids=None,
        environment=environment,
        timeout_s=timeout_s,
        runtime=runtime,
        slot=slot,
    )
    if execution.status != R.OK or answer is None:
        status = execution.status if execution.status != R.OK else "failed"
        raise RepositoryRunError(status, execution.detail or "the suite did not answer")
    if not answer.get("ran"):
        status = R.INFRA_ERROR if answer.get("no_pytest") else "failed"
        raise RepositoryRunError(status, str(answer.get("error", answer.get("forged", ""))))
    statuses = statuses_of(answer)
    flags = cross_check(answer, statuses)
    if flags:
        raise RepositoryRunError("failed", distrust(flags, answer))
    messages = {str(k): str(v) for k, v in (answer.get("messages") or {}).items()}
    for node, text in (answer.get("collect_errors") or {}).items():
        statuses.setdefault(str(node), "error")
        lines = str(text).strip().splitlines()
        messages.setdefault(str(node), lines[-1][:500] if lines else "")
    return SuiteReport(dict(sorted(statuses.items())), messages, str(answer.get("log_tail", "")))


def run_suite(
    files: Mapping[str, bytes],
    *,
    test_command: str = "pytest",
    environment: dict | None = None,
    timeout_s: float = 300.0,
    runtime: str = "python",
    slot: str | None = None,
) -> dict[str, str]:
    """The statuses of :func:`run_suite_report` (same arguments and errors): every collected
    node id -> one of :data:`STATUSES` (all but ``missing``); a module that failed to collect
    appears under its own node id (``tests/test_x.py``) as ``error``."""
    return run_suite_report(
        files,
        test_command=test_command,
        environment=environment,
        timeout_s=timeout_s,
        runtime=runtime,
        slot=slot,
    ).statuses
