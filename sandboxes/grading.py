"""Run a program against a test suite in fresh sandboxes and count its tests.

Two sandboxes per execution: the submission's (``harness/python_runner.py``) and
the tests' (``harness/python_check.py``), joined only by a pair of pipes that carry
calls and plain-data answers. The verdict never rests on an exit status: the host
knows the expected test ids (from :func:`split_check`) and a test counts as passed
only when the tests' sandbox reported it passed before its ``done`` event. An early
``exit(0)``, a crash, a timeout or a syntax error leaves tests unreported or failed,
and the submission cannot reach the report channel to forge one.
"""

from __future__ import annotations

import ast
import atexit
import base64
import functools
import json
import logging
import marshal
import secrets
import sys
import threading
from pathlib import Path

from sandboxes import result as R
from sandboxes.environments.mount import HOST, Mount
from sandboxes.harness.python_check import compile_suite, program_names, split_check
from sandboxes.harness.python_outputs import CHECKER_ID, output_ids
from sandboxes.harness.python_stdio import stdio_ids
from sandboxes.interpreters import RuntimeUnavailable, python_interpreter
from sandboxes.pairs import AUDITED_RUNNER_FDS, WarmGrader
from sandboxes.process import Limits
from sandboxes.resident import Zygote, ZygoteDied, interpreter_bind_dirs

log = logging.getLogger(__name__)
HARNESS_DIR = Path(__file__).parent / "harness"
SOLUTION_FILE = "solution.py"


@functools.lru_cache(maxsize=4)
def _harness_sources(*names: str) -> dict[str, str]:
    """Roles' harnesses and the plain-data codec they use (standard library only)."""
    return {
        source: (HARNESS_DIR / f"{source}.py").read_text(encoding="utf-8")
        for source in ("plaindata", *names)
    }


# The driver role of each Python verifier: unit tests, or output-based verifiers.
DRIVER_ROLES = {
    "python-check": "python_check",
    "output-match": "python_outputs",
    "custom-checker": "python_outputs",
    "python-probe": "python_check",
    "stdio": "python_stdio",
}
# Verifiers whose tests call the program's functions (values cross the plain-data boundary,
# the task's trusted classes with them); the others run it as a script.
CALLING_VERIFIERS = ("python-check", "python-probe")


def verifier_test_ids(verifier: str, test_source: str) -> list[str]:
    """The test ids of a suite for ``verifier`` (see ``harness/python_outputs.py``).

    Raises:
        SyntaxError, ValueError: the suite cannot be read for this verifier.
    """
    if verifier == "python-check":
        return expected_test_ids(test_source)
    if verifier == "output-match":
        return output_ids(test_source)
    if verifier == "python-probe":  # a JSON list of argument tuples; one call each
        return [f"call_{k}" for k in range(len(json.loads(test_source)))]
    if verifier == "stdio":
        return stdio_ids(test_source)
    if verifier == "custom-checker":
        with PARSE_LOCK:
            module = ast.parse(test_source)
        if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in module.body):
            raise ValueError("a custom checker defines check(files) -> (score, reason)")
        return [CHECKER_ID]
    raise ValueError(f"unknown Python verifier {verifier!r}; known: {', '.join(DRIVER_ROLES)}")


def expected_test_ids(test_source: str) -> list[str]:
    """The ids of the tests in a ``check(candidate)`` test source, in order.

    Raises:
        SyntaxError, ValueError: as :func:`split_check`.
    """
    return list(_expected_test_ids(test_source))


# CPython 3.11's parser keeps its recursion-depth count per interpreter, not per thread: two
# worker slots parsing at once can fail with "AST constructor recursion depth mismatch"
# (python/cpython#106905). The worker's slots are threads, so their parses take turns.
PARSE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _expected_test_ids(test_source: str) -> tuple[str, ...]:
    # A worker grades the same suites again and again (a group, every step): parse once.
    with PARSE_LOCK:
        return tuple(test_id for test_id, _stmt in split_check(test_source) if test_id is not None)


# Suites above this size are parsed in the sandbox as before: the cache below holds at most
# COMPILED_SUITES of them, so its memory stays bounded (~256 MB at worst, kilobytes typically).
COMPILED_SUITE_MAX_CHARS = 256 * 1024
COMPILED_SUITES = 1024


def compiled_suite(test_source: str, prompt: str, setup: str = "") -> dict | None:
    """A ``check(candidate)`` suite compiled here for the tests' sandbox (``spec["compiled"]``,
    see ``harness/python_check.py``): ``{"tag": cache tag, "code": base64 of marshal}``.

    Compiled once per suite, prompt and setup code (a worker grades the same suites again
    and again), so the tests' sandbox neither parses nor compiles. The sandbox uses it only
    when its interpreter has the same cache tag; bytecode from another version is never run.

    Returns:
        None when the suite does not compile here, or is over
        :data:`COMPILED_SUITE_MAX_CHARS` (the sandbox then reads the source, and reports
        any error, as it always has).
    """
    if len(test_source) + len(prompt) + len(setup) > COMPILED_SUITE_MAX_CHARS:
        return None
    return _compiled_suite(test_source, prompt, setup)


@functools.lru_cache(maxsize=COMPILED_SUITES)
def _compiled_suite(test_source: str, prompt: str, setup: str = "") -> dict | None:
    with PARSE_LOCK:
        try:
            suite = compile_suite(test_source, prompt, setup)
        except (SyntaxError, ValueError):
            return None
    return {
        "tag": sys.implementation.cache_tag,
        "code": base64.b64encode(marshal.dumps(suite)).decode("ascii"),
    }


def suite_program_names(test_source: str, setup: str = "") -> list[str]:
    """The names a ``check(candidate)`` suite uses that it does not bind (see
    :func:`~sandboxes.harness.python_check.program_names`); cached per suite. Empty for a
    suite that does not compile here (the sandbox reports its error)."""
    if len(test_source) + len(setup) > COMPILED_SUITE_MAX_CHARS:
        return []
    return list(_suite_program_names(test_source, setup))


@functools.lru_cache(maxsize=COMPILED_SUITES)
def _suite_program_names(test_source: str, setup: str) -> tuple[str, ...]:
    with PARSE_LOCK:
        try:
            return tuple(program_names(test_source, setup))
        except (SyntaxError, ValueError):
            return ()


def trusted_source(prompt: str, setup: str) -> str:
    """What of the task's trusted content runs in the program's sandbox before it loads
    (``spec["trusted"]``, see ``harness/python_runner.py``): the module-level imports and
    class statements of the prompt (only when it defines a class) and of the suite's setup
    code, in that order, as their own text. Never a test, a constant or a setup statement
    that builds data: only what defines the trusted classes and the names MBPP's setup
    imports. Empty when there is none of that (the common case: nothing more is sent).
    """
    if "class" not in prompt and not setup:
        return ""
    return _trusted_source(prompt, setup)


@functools.lru_cache(maxsize=COMPILED_SUITES)
def _trusted_source(prompt: str, setup: str) -> str:
    parts = []
    for source, imports_alone in ((prompt, False), (setup, True)):
        with PARSE_LOCK:
            try:
                module = ast.parse(source)
            except (SyntaxError, ValueError):
                continue
        nodes = [
            n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef))
        ]
        if imports_alone or any(isinstance(n, ast.ClassDef) for n in nodes):
            parts.extend(statement_text(source, module, node) for node in nodes)
    return "\n".join(parts)


def statement_text(source: str, module: ast.Module, node: ast.stmt) -> str:
    """A module-level statement's own lines (decorators included); its unparsed form when a
    line also holds another statement (``import os; x = 1``)."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
    last = node.end_lineno or node.lineno
    shares = any(
        other is not node and other.lineno <= last and (other.end_lineno or other.lineno) >= first
        for other in module.body
    )
    if shares:
        return ast.unparse(node)
    return "\n".join(source.splitlines()[first - 1 : last])


class PythonGrader(WarmGrader):
    """Grades Python programs in a warm pair of resident sandboxes (see :class:`WarmGrader`).

    The submission's tree gets an audit pipe (fd 6): its harness records what the program
    attempts (network, processes, writes outside the scratch space...) and the result
    carries it (``ExecutionResult.audit``; see ``harness/python_runner.py``).
    """

    runner_fds = AUDITED_RUNNER_FDS

    def __init__(self, mount: Mount = HOST) -> None:
        """``mount``: the environment both sandboxes run in (its root, packages and
        variables, see :func:`sandboxes.environments.mount_for`); default the host's Python
        with the standard library only."""
        self.mount = mount
        self.interpreter = mount.launcher[-1] if mount.launcher else python_interpreter()
        binds = interpreter_bind_dirs(self.interpreter) if mount.host_root else []
        self.runner = Zygote(
            self.interpreter,
            "python_runner",
            _harness_sources("python_runner"),
            binds,
            extra_config=dict(mount.config),
            launcher=list(mount.launcher),
        )
        self.driver = Zygote(
            self.interpreter,
            "python_check",
            _harness_sources("python_check", "python_outputs", "python_stdio"),
            binds,
            extra_config=dict(mount.config),
            launcher=list(mount.launcher),
        )
        self.spare = None

    def grade(
        self,
        program: str,
        test_source: str,
        entry_point: str,
        *,
        prompt: str = "",
        limits: Limits | None = None,
        files: dict[str, str] | None = None,
        verifier: str = "python-check",
        setup: str = "",
    ) -> R.ExecutionResult:
        """Execute ``program`` in one sandbox and the tests of ``test_source`` in another.

        The tests' ``candidate`` calls ``entry_point`` in the submission's sandbox over a
        pair of pipes; only plain data crosses (see ``harness/plaindata.py``). The
        submission's sandbox never holds the tests, the expected values or the report
        channel, so it can neither read nor forge them.

        Args:
            program: the full Python source under test (prompt plus completion).
            test_source: HumanEval-style source defining ``check(candidate)``; for the
                ``output-match`` and ``custom-checker`` verifiers, their suite (see
                ``harness/python_outputs.py``).
            entry_point: the name of the function the tests call.
            prompt: the task's prompt, run on the tests' side for helpers the tests use.
            limits: resource limits of each sandbox; defaults to :class:`Limits`.
            files: workspace files written beside the program (``{relative path: text}``).
            verifier: ``python-check`` (unit tests), ``output-match``, ``custom-checker``,
                ``stdio`` (the program as a script on each case's standard input, see
                ``harness/python_stdio.py``), or ``python-probe`` (report what
                ``entry_point`` returns on each input: test generation).
            setup: the suite's setup code (``python-check``): run on the tests' side before
                the tests; its imports and class statements (and the prompt's classes) also
                run in the program's sandbox, so instances of those trusted classes cross.

        Returns:
            An :class:`ExecutionResult` with one :class:`TestResult` per expected id;
            stdout, stderr, times and memory are the submission's.

        Raises:
            ZygoteDied: a resident sandbox died (the caller retries, then reports
                ``infra_error``; never a policy failure).
        """
        limits = limits or Limits()
        expected = verifier_test_ids(verifier, test_source)
        token = secrets.token_hex(
            16
        )  # marks the harness's audit lines; the submission never holds it
        calling = verifier in CALLING_VERIFIERS
        setup = setup if calling else ""
        runner_spec = {
            "solution_path": SOLUTION_FILE,
            "request_fd": 4,
            "reply_fd": 5,
            "script": verifier != "python-check",
            "audit_fd": 6,
            "audit_token": token,
        }
        if calling:
            trusted = trusted_source(prompt, setup)
            if trusted:
                runner_spec.update(trusted=trusted, entry_point=entry_point)
        if verifier == "stdio":
            runner_spec["stdio"] = True
        driver_spec = {
            "tests": test_source,
            "prompt": prompt,
            "entry_point": entry_point,
            "verifier": verifier,
            "test_timeout_s": limits.test_timeout_s,
            "request_fd": 4,
            "reply_fd": 5,
            "results_fd": 6,
            "compiled": compiled_suite(test_source, prompt, setup)
            if verifier == "python-check"
            else None,
        }
        if setup:
            driver_spec["setup"] = setup
        if verifier == "python-check":
            driver_spec["program_names"] = suite_program_names(test_source, setup)
        runner, driver = self.run_pair(
            {"files": {**(files or {}), SOLUTION_FILE: program}, "spec": runner_spec},
            {"role": DRIVER_ROLES[verifier], "spec": driver_spec},
            limits,
        )
        return _result(runner, driver, expected, audit_token=token)


def _result(
    runner, driver, expected: list[str], *, audit_token: str | None = None
) -> R.ExecutionResult:
    events = _parse_results(driver.results)
    reported = events["tests"]
    tests = [
        R.TestResult(
            id=tid,
            passed=reported[tid][0],
            error=reported[tid][1],
            score=reported[tid][2],
            output=reported[tid][3],
        )
        if tid in reported
        else R.TestResult(id=tid, passed=False, error="not reported")
        for tid in expected
    ]
    stderr = runner.stderr.decode("utf-8", "replace")
    status = _status(runner, driver, events=events, tests=tests, stderr=stderr)
    detail = events["load_error"] or events["submission_lost"] or ""
    if not events["done"] and not (runner.timed_out or driver.timed_out):
        detail = (
            detail or "test driver ended early: " + driver.stderr.decode("utf-8", "replace")[-300:]
        )
    audit, audit_count, call_ms = parse_audit(runner, audit_token) if audit_token else ([], 0, 0.0)
    return R.ExecutionResult(
        status=status,
        exit_code=runner.exit_code,
        signal=runner.signal,
        stdout=runner.stdout.decode("utf-8", "replace"),
        stderr=stderr,
        truncated=runner.truncated,
        wall_ms=round(max(runner.wall_ms, driver.wall_ms), 3),
        cpu_ms=round(runner.cpu_ms, 3),
        peak_memory_bytes=runner.peak_memory_bytes,
        tests=tests,
        detail=detail,
        enforcement=runner.enforcement,
        readonly_root=runner.readonly_root,
        audit=audit,
        audit_count=audit_count,
        call_cpu_ms=call_ms,
    )


def parse_audit(runner, token: str) -> tuple[list[dict], int, float]:
    """The submission's audit events from its tree's audit pipe, how many there were, and the
    CPU milliseconds its process spent inside the tests' calls (0.0 without the end line).

    Lines carrying ``token`` are the harness's: events (``{"e", "a"}``, at most
    :data:`~sandboxes.result.AUDIT_MAX_EVENTS`), counts past that cap (``{"n"}``) and the end
    line (``{"end", "call_ms"}``). Any other line was written by the submission itself: one
    ``crucible.audit_forged`` event says so. A process that ended by itself (not killed by
    the host for time, output or memory, nor by a signal) without the end line cut the
    channel or its own run short: ``crucible.audit_lost``.
    """
    events: list[dict] = []
    count = 0
    ended = False
    call_ms = 0.0
    forged = ""
    for raw_line in runner.audit.split(b"\n"):
        if not raw_line.strip():
            continue
        try:
            line = json.loads(raw_line.decode("utf-8", "replace"))
        except ValueError:
            line = None
        if not isinstance(line, dict) or line.get("t") != token:
            forged = forged or raw_line[:120].decode("utf-8", "replace")
            continue
        if "e" in line and len(events) < R.AUDIT_MAX_EVENTS:
            events.append({"event": str(line["e"])[:100], "args": str(line.get("a", ""))[:200]})
            count = max(count, len(events))
        elif isinstance(line.get("n"), int) and not isinstance(line["n"], bool):
            count = max(count, line["n"])
        elif isinstance(line.get("end"), int) and not isinstance(line["end"], bool):
            count = max(count, line["end"])
            ended = True
            spent = line.get("call_ms")
            if isinstance(spent, (int, float)) and not isinstance(spent, bool) and spent >= 0:
                call_ms = float(spent)
    if forged:
        events.append({"event": R.AUDIT_FORGED, "args": repr(forged)[:200]})
        count += 1
    killed = (
        runner.timed_out
        or runner.output_exceeded
        or runner.memory_limit_hit
        or runner.exit_code is None
    )
    if not ended and not killed:
        events.append(
            {
                "event": R.AUDIT_LOST,
                "args": f"exit status {runner.exit_code} without the harness's end line",
            }
        )
        count += 1
    return events, count, call_ms


_local = threading.local()


def local_grader() -> PythonGrader:
    """This thread's resident grader, started on first use and stopped at exit."""
    grader = getattr(_local, "grader", None)
    if grader is None:
        grader = _local.grader = PythonGrader()
        atexit.register(grader.close)
    return grader


def run_python_tests(
    program: str,
    test_source: str,
    entry_point: str,
    *,
    prompt: str = "",
    limits: Limits | None = None,
    setup: str = "",
    verifier: str = "python-check",
    grader: PythonGrader | None = None,
) -> R.ExecutionResult:
    """Grade in this thread's resident sandboxes (see :meth:`PythonGrader.grade`), or in
    ``grader``'s (one started in an environment).

    A sandbox that dies is replaced and the execution is reported as ``infra_error``.
    """
    grader = grader or local_grader()
    try:
        return grader.grade(
            program,
            test_source,
            entry_point,
            prompt=prompt,
            limits=limits,
            setup=setup,
            verifier=verifier,
        )
    except (ZygoteDied, OSError, RuntimeUnavailable) as exc:
        log.warning("sandbox failed: %s", exc)
        grader.close()
        return R.ExecutionResult(status=R.INFRA_ERROR, detail=f"sandbox failed: {exc}")


def _parse_results(raw: bytes) -> dict:
    """Read the driver's report: per-test results (first report wins) and its events."""
    events = {"tests": {}, "done": False, "load_error": None, "submission_lost": None}
    for raw_line in raw.split(b"\n"):  # JSON lines: only "\n" ends one (not U+2028 & co.)
        line = raw_line.decode("utf-8", "replace")
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if (
            kind == "test"
            and isinstance(event.get("id"), str)
            and event["id"] not in events["tests"]
        ):
            score = event.get("score")
            if (
                isinstance(score, bool)
                or not isinstance(score, (int, float))
                or not 0 <= score <= 1
            ):
                score = None
            output = str(event.get("output", ""))[:4000]
            events["tests"][event["id"]] = (
                event.get("passed") is True,
                str(event.get("error", ""))[:500],
                score,
                output,
            )
        elif kind in ("load_error", "submission_lost"):
            events[kind] = str(event.get("error", ""))[:500]
        elif kind == "done":
            events["done"] = True
    return events


def _status(runner, driver, *, events: dict, tests: list[R.TestResult], stderr: str) -> str:
    if runner.timed_out or driver.timed_out:
        return R.TIMEOUT
    if runner.output_exceeded:
        return R.OUTPUT_LIMIT
    # The cgroup's OOM kill, or the interpreter's own report of running out; not merely the
    # word on stderr, which a submission could print to relabel its failure.
    if (
        runner.memory_limit_hit
        or "heap out of memory" in stderr
        or "MemoryError" in (events["load_error"] or "")
        or any(t.error.startswith("MemoryError") for t in tests)
    ):
        return R.MEMORY_LIMIT
    if not events["done"] or events["submission_lost"] or runner.signal is not None:
        return R.CRASHED
    if tests and all(t.passed for t in tests):
        return R.OK
    return R.FAILED
