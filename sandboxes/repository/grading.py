"""Grading a repository task: FAIL_TO_PASS and PASS_TO_PASS ids, run in a fresh sandbox session.

:func:`grade_repository` takes the submission's final files (the agent's workspace, or the
task's files with a patch applied), resets every test file and test configuration to the task
version's and adds the hidden test files (:func:`~sandboxes.repository.paths.grading_files`),
opens a FRESH session of the task's environment (never the agent's), runs pytest there with
the runner of ``sandboxes/harness/pytest_repository.py`` (sent on stdin, loaded from outside
the workspace) on the ids' test files, and reads one result per id.

What decides, and what never does:

* an id passes only when its setup, call and teardown were each reported ``passed`` by the
  grading's own reporter plugin; a missing, uncollected, skipped, xfailed, xpassed, failing
  or erroring id fails, and pytest's exit code is recorded but never read;
* the answer counts only as the last bytes of the call's stdout, framed by a nonce the
  submission is never given (it travels on stdin, and lives in the runner's locals); fake
  ``PASSED`` lines, fake junit or report files, and frames printed by the code under test
  are ignored, and one printed after the runner's makes the whole answer void;
* cross-checks void the answer (every id ``error``, ``resolved`` False) and raise a flag:
  ``report_mismatch`` (a call raised but was reported passed, or the reporter's and pytest's
  junit XML tallies disagree), ``pytest_tampered`` (a function or class of pytest's or
  pluggy's runtime modules was replaced while the suite ran), ``foreign_plugin`` (a plugin or
  hook implementation registered from anywhere but the task's test files, pytest, the
  environment or the standard library), ``reads_hidden_tests`` (an ``open``, link, rename or
  process naming a hidden test file while workspace code was on the stack; refused by an audit
  hook, which also keeps the read from succeeding); ``incomplete`` (the runner never
  answered: an early ``os._exit``, a crash) fails every id;
* a timeout or an output flood fails every id (``status`` ``timeout`` / ``failed``).

What the code under test can still do (README, "Repository grading"): it runs in pytest's own
process as the same user, so a deliberate forgery stays possible, by means honest code never
needs: reaching the runner's frame or the reporter (``sys._getframe``, tracebacks' frames,
``gc``) to rewrite records, or finding the nonce in its own memory (``/proc/self/mem``);
patching a pytest function and restoring it within one test; patching the standard library
the runner calls at the end; reading a hidden test from memory (``linecache``, code
constants, ``f_locals``) or through a child shell's glob; taking the expected value from the
calling test's frame. The hack detectors flag those means in the submission's source:
``test_tampering`` (``_pytest``/``pytest`` imports, ``sys.modules``, frame walking,
``gc.get_referrers``, monkeypatched module attributes, ``'pytest' in sys.modules`` and
``PYTEST_CURRENT_TEST``), ``reads_expected_values`` (``f_locals``, ``co_consts``,
``linecache``, ``gc.get_objects``, ``/proc`` and reads of test-like paths) and ``early_exit``
(``sys.exit``, ``os._exit``, ``pytest.skip``/``exit``, ``atexit``), given the submission's
changed non-test Python files.
"""

from __future__ import annotations

import ast
import re
import secrets
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import result as R
from sandboxes.repository.patches import PatchError, apply_patch
from sandboxes.repository.paths import grading_files, pytest_config
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.workspace import Workspace

RUNNER = Path(__file__).resolve().parent.parent / "harness" / "pytest_repository.py"
SITE_PACKAGES = "/env/site-packages"
ANSWER_CAP_BYTES = 7 * 1024**2  # under the session's 8 MiB output kill
# The boot reads the configuration and the runner from stdin; nothing of it is a secret.
BOOT = (
    "import sys\n"
    "def _boot():\n"
    "    data = sys.stdin.buffer.read()\n"
    "    cut = data.index(b'\\n')\n"
    "    scope = {'__name__': 'crucible_grading_runner'}\n"
    "    exec(compile(data[cut + 1:], 'crucible-grading-runner', 'exec'), scope)\n"
    "    scope['main'](data[:cut])\n"
    "_boot()\n"
)
RESERVED_OPTIONS = ("-c", "--config-file", "--rootdir", "--junitxml", "--junit-xml")
PLUGIN_NAME = re.compile(r"^(no:)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
STATUSES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "missing")


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


@dataclass
class RepositoryResult:
    """One repository grading.

    Attributes:
        status: ``ok`` (the suite ran and answered), ``failed`` (it did not answer: an early
            exit, a crash, an output flood, a voided answer), ``timeout``, ``infra_error``
            (the sandbox failed, or the environment has no pytest: never a reward).
        per_id: every FAIL_TO_PASS and PASS_TO_PASS id -> one of :data:`STATUSES`.
        resolved: every id ``passed``.
        fraction: ids passed / ids, in [0, 1].
        detail: why, when not every id passed (collection errors, the failing ids...).
        stdout_tail: the end of pytest's own output (8 KiB).
        wall_ms: the pytest call's wall-clock milliseconds.
        flags: ``report_mismatch``, ``pytest_tampered``, ``foreign_plugin``,
            ``incomplete``, ``collection_error``, ``output_flood``.
        environment: the build key the grading ran in.
        messages: id -> the first line of its first failure (pytest's crash message, e.g.
            ``AssertionError: assert 9 == 10``; 500 characters at most), for ids that failed
            or errored; written by the code under test's exceptions: untrusted text.
    """

    status: str
    per_id: dict[str, str]
    resolved: bool
    fraction: float
    detail: str = ""
    stdout_tail: str = ""
    wall_ms: float = 0.0
    flags: list[str] = field(default_factory=list)
    environment: str = ""
    messages: dict[str, str] = field(default_factory=dict)


def id_status(phases: Mapping[str, str] | None) -> str:
    """One id's status from its phases' outcomes (``{"setup"|"call"|"teardown": outcome}``,
    as the runner records them): ``passed`` only when all three passed."""
    if not phases:
        return "missing"
    setup, call, teardown = (phases.get(w) for w in ("setup", "call", "teardown"))
    if setup in ("skipped", "xfailed"):
        return "skipped" if setup == "skipped" else "xfailed"
    if setup != "passed":
        return "error" if setup == "failed" else "missing"
    if call in ("failed", "skipped", "xfailed", "xpassed"):
        return call
    if call != "passed":
        return "missing"
    if teardown == "passed":
        return "passed"
    return "error" if teardown == "failed" else "missing"


def _read_answer(stdout: str, nonce: str) -> dict | None:
    """The runner's frame when it ends stdout, else None."""
    end = f" {nonce} END"
    text = stdout.rstrip("\n")
    if not text.endswith(end):
        return None
    start = text.rfind(f"{nonce} BEGIN ")
    if start < 0:
        return None
    body = text[start + len(nonce) + len(" BEGIN ") : len(text) - len(end)]
    try:
        answer = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return answer if isinstance(answer, dict) else None


def _cross_check(answer: dict, statuses: Mapping[str, str]) -> list[str]:
    """Flags the answer earns (see the module); ``statuses`` covers every reported item."""
    flags = []
    if answer.get("mismatch"):
        flags.append("report_mismatch")
    # pytest's junit XML is a second tally of the same run: it must count as many passes
    # as the reporter, and at least as many test cases (it also counts collection errors,
    # skipped modules and internal errors as cases).
    junit = answer.get("junit")
    passed = sum(1 for s in statuses.values() if s in ("passed", "xpassed"))
    if junit is None:
        if statuses:
            flags.append("report_mismatch")
    elif junit.get("passed") != passed or int(junit.get("tests", 0)) < len(statuses):
        flags.append("report_mismatch")
    if answer.get("tampered"):
        flags.append("pytest_tampered")
    if answer.get("foreign"):
        flags.append("foreign_plugin")
    if answer.get("hidden_reads"):
        flags.append("reads_hidden_tests")
    return flags


def _distrust(flags: list[str], answer: dict) -> str:
    """The detail of a voided answer: the flags and what earned them."""
    evidence = [*answer.get("mismatch", [])[:5], *answer.get("tampered", [])[:5]]
    evidence += answer.get("foreign", [])[:5] + answer.get("hidden_reads", [])[:5]
    if answer.get("junit") is not None and "report_mismatch" in flags:
        evidence.append(f"junit {answer['junit']}")
    return f"the report was not trustworthy ({', '.join(flags)}): {'; '.join(map(str, evidence))}"


def _run(
    files: Mapping[str, bytes],
    test_files: Mapping[str, bytes],
    *,
    trusted: list[str],
    hidden: list[str] = (),
    args: list[str],
    ids: list[str] | None,
    environment: dict | None,
    timeout_s: float,
    runtime: str,
    slot: str | None,
) -> tuple[R.ExecutionResult, dict | None]:
    """One pytest run in a fresh session: the execution and the runner's answer (None when
    the stdout did not end with a valid frame)."""
    from sandboxes.sessions.client import open_session  # noqa: PLC0415 (Redis on use only)

    config_path, config_content = pytest_config(test_files)
    workspace_files = dict(files)
    workspace_files[config_path] = config_content
    workspace = Workspace.from_files(workspace_files)
    nonce = secrets.token_hex(16)
    config = {
        "nonce": nonce,
        "ids": ids,
        "args": args,
        "config_file": config_path,
        "trusted": trusted,
        "hidden": list(hidden),
        "site": SITE_PACKAGES if environment and environment.get("packages") else "",
    }
    import json  # noqa: PLC0415

    stdin = json.dumps(config).encode() + b"\n" + RUNNER.read_bytes()
    limits = SessionLimits(idle_timeout_s=max(60.0, timeout_s + 60.0))
    with open_session(
        workspace, limits=limits, runtime=runtime, slot=slot, environment=environment
    ) as session:
        execution = session.exec(
            f"exec python3 -I -c {shlex.quote(BOOT)}",
            stdin=stdin,
            timeout_s=timeout_s,
            output_cap_bytes=ANSWER_CAP_BYTES,
        )
    answer = _read_answer(execution.stdout, nonce) if execution.status == R.OK else None
    return execution, answer


def _no_pytest(answer: dict) -> bool:
    return bool(answer.get("no_pytest"))


def grade_repository(
    files: Mapping[str, bytes],
    tests: RepositoryTests,
    *,
    environment: dict | None = None,
    runtime: str = "python",
    slot: str | None = None,
) -> RepositoryResult:
    """Grade a submission's final files against ``tests`` in a fresh sandbox session (see the
    module).

    Args:
        files: the final workspace (``{path: bytes}``), e.g. ``apply_patch(task_files, diff)``
            or the session's files; anything under ``.git`` is dropped.
        tests: the task version's :class:`RepositoryTests`.
        environment: the task version's built environment
            (``tasks_library.environments.environment_request``); it must hold pytest.
        runtime, slot: the session pool to use (:func:`sandboxes.sessions.open_session`).

    Returns:
        a :class:`RepositoryResult`; ``infra_error`` when the sandbox failed (retry, never score).

    Raises:
        ValueError: a bad workspace path (named).
    """
    ids = list(tests.ids)
    final = grading_files(files, tests.test_files, tests.hidden_files)
    modules = [i.split("::", 1)[0] for i in ids]
    present = [m for m in dict.fromkeys(modules) if m in final]
    failing = dict.fromkeys(ids, "missing")
    if not present:
        return RepositoryResult(
            "failed", failing, False, 0.0, detail="no test file of any id is in the workspace"
        )
    started = time.monotonic()
    execution, answer = _run(
        final,
        tests.test_files,
        trusted=sorted({*tests.test_files, *tests.hidden_files}),
        hidden=sorted(tests.hidden_files),
        args=[*pytest_options(tests.test_command), *present],
        ids=ids,
        environment=environment,
        timeout_s=tests.timeout_s,
        runtime=runtime,
        slot=slot,
    )
    wall_ms = (time.monotonic() - started) * 1000.0
    key = str((environment or {}).get("key", ""))

    def failed(status: str, detail: str, flags: list[str], per_id: str = "error"):
        return RepositoryResult(
            status,
            dict.fromkeys(ids, per_id),
            False,
            0.0,
            detail=detail,
            stdout_tail=(answer or {}).get("log_tail", "") or execution.stdout[-8192:],
            wall_ms=wall_ms,
            flags=flags,
            environment=key,
        )

    if execution.status == R.INFRA_ERROR:
        return failed(R.INFRA_ERROR, execution.detail or "the grading session was lost", [])
    if execution.status == R.TIMEOUT:
        return failed("timeout", f"pytest ran past {tests.timeout_s:.0f} s", [])
    if execution.status == R.OUTPUT_LIMIT:
        return failed("failed", "the run flooded its output", ["output_flood"])
    if answer is None:
        why = execution.detail or execution.stderr[-500:] or f"exit {execution.exit_code}"
        return failed("failed", f"the suite did not answer ({why})", ["incomplete"])
    if not answer.get("ran"):
        if _no_pytest(answer):
            detail = f"the environment {key or '(host)'} has no pytest"
            return failed(R.INFRA_ERROR, detail, [])
        return failed("failed", f"the runner failed: {answer.get('error', '')}", ["incomplete"])
    phases = answer.get("phases") or {}
    statuses = {str(node): id_status(p) for node, p in phases.items() if isinstance(p, dict)}
    flags = _cross_check(answer, statuses)
    if flags:
        return failed("failed", _distrust(flags, answer), flags)
    per_id = {i: statuses.get(i, "missing") for i in ids}
    passed = sum(1 for s in per_id.values() if s == "passed")
    extra = ["collection_error"] if answer.get("collect_errors") else []
    not_passed = [f"{i}: {s}" for i, s in per_id.items() if s != "passed"]
    messages = {i: str(m) for i, m in (answer.get("messages") or {}).items() if i in per_id}
    detail = "; ".join(not_passed[:20])
    if answer.get("collect_errors"):
        detail += "; collection errors in " + ", ".join(sorted(answer["collect_errors"])[:10])
    return RepositoryResult(
        "ok",
        per_id,
        passed == len(ids),
        passed / len(ids),
        detail=detail.strip("; "),
        stdout_tail=str(answer.get("log_tail", "")),
        wall_ms=wall_ms,
        flags=extra,
        environment=key,
        messages=messages,
    )


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
            "failed",
            dict.fromkeys(tests.ids, "error"),
            False,
            0.0,
            detail=str(exc),
            flags=["patch_does_not_apply"],
            environment=str((environment or {}).get("key", "")),
        )
    return grade_repository(final, tests, environment=environment, runtime=runtime, slot=slot)


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
    execution, answer = _run(
        own,
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
        status = R.INFRA_ERROR if _no_pytest(answer) else "failed"
        raise RepositoryRunError(status, str(answer.get("error", "")))
    phases = answer.get("phases") or {}
    statuses = {str(node): id_status(p) for node, p in phases.items() if isinstance(p, dict)}
    flags = _cross_check(answer, statuses)
    if flags:
        raise RepositoryRunError("failed", _distrust(flags, answer))
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
