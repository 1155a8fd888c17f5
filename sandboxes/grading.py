"""Run a program against a test suite in a fresh sandbox and count its tests.

The verdict never rests on the exit status: the host knows the expected test ids
(from :func:`sandboxes.harness.python_check.split_check`) and a test counts as passed
only when the harness reported it passed, with this execution's nonce, before a
``done`` event. An early ``exit(0)``, a crash, a timeout or a syntax error therefore
leaves tests unreported, and unreported tests fail.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import shutil
from pathlib import Path

from sandboxes import result as R
from sandboxes.harness.python_check import split_check
from sandboxes.process import Limits, make_workspace, run_tree
from sandboxes.runtimes import RuntimeUnavailable, python_interpreter

log = logging.getLogger(__name__)
HARNESS = Path(__file__).parent / "harness" / "python_check.py"
SOLUTION_FILE = "solution.py"


@functools.lru_cache(maxsize=1)
def _harness_source() -> str:
    return HARNESS.read_text(encoding="utf-8")


def expected_test_ids(test_source: str) -> list[str]:
    """The ids of the tests in a ``check(candidate)`` test source, in order.

    Raises:
        SyntaxError, ValueError: as :func:`split_check`.
    """
    return [test_id for test_id, _stmt in split_check(test_source) if test_id is not None]


def run_python_tests(
    program: str,
    test_source: str,
    entry_point: str,
    *,
    limits: Limits | None = None,
) -> R.ExecutionResult:
    """Execute ``program`` then the tests of ``test_source`` against ``entry_point``.

    Args:
        program: the full Python source under test (prompt plus completion).
        test_source: HumanEval-style source defining ``check(candidate)``.
        entry_point: the name of the function the tests call.
        limits: resource limits; defaults to :class:`Limits` with the configured timeout.

    Returns:
        An :class:`ExecutionResult` with one :class:`TestResult` per expected id.
        Launch failures come back as status ``infra_error``, never raised.
    """
    limits = limits or Limits()
    expected = expected_test_ids(test_source)
    nonce = secrets.token_hex(16)
    try:
        workspace = make_workspace({SOLUTION_FILE: program})
    except OSError as exc:
        return R.ExecutionResult(status=R.INFRA_ERROR, detail=f"could not create workspace: {exc}")
    try:
        # The harness travels as ``-c`` source and the tests through stdin: nothing
        # of the grader lies in the workspace, and the sandbox user needs no read
        # access to the project's checkout (which may sit under a private home).
        spec = {
            "nonce": nonce,
            "solution_path": str(workspace / SOLUTION_FILE),
            "tests": test_source,
            "entry_point": entry_point,
        }
        try:
            outcome = run_tree(
                [python_interpreter(), "-I", "-c", _harness_source()],
                cwd=workspace,
                stdin_for=lambda fd: json.dumps({**spec, "results_fd": fd}).encode(),
                limits=limits,
            )
        except (OSError, RuntimeUnavailable) as exc:
            log.exception("sandbox launch failed")
            return R.ExecutionResult(status=R.INFRA_ERROR, detail=f"sandbox launch failed: {exc}")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)

    reported, done, load_error = _parse_results(outcome.results, nonce)
    tests = [
        R.TestResult(id=tid, passed=reported.get(tid, (False, ""))[0], error=reported.get(tid, (False, "not reported"))[1])
        for tid in expected
    ]
    stderr = outcome.stderr.decode("utf-8", "replace")
    status = _status(outcome, done=done, tests=tests, stderr=stderr)
    return R.ExecutionResult(
        status=status,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        stdout=outcome.stdout.decode("utf-8", "replace"),
        stderr=stderr,
        truncated=outcome.truncated,
        wall_ms=round(outcome.wall_ms, 3),
        cpu_ms=round(outcome.cpu_ms, 3),
        peak_memory_bytes=outcome.peak_memory_bytes,
        tests=tests,
        detail=load_error or "",
    )


def _parse_results(raw: bytes, nonce: str) -> tuple[dict[str, tuple[bool, str]], bool, str | None]:
    """Read the harness's lines; lines without the nonce are ignored, first report wins."""
    reported: dict[str, tuple[bool, str]] = {}
    done = False
    load_error = None
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("nonce") != nonce:
            continue
        kind = event.get("event")
        if kind == "test" and isinstance(event.get("id"), str) and event["id"] not in reported:
            reported[event["id"]] = (event.get("passed") is True, str(event.get("error", ""))[:500])
        elif kind == "load_error":
            load_error = str(event.get("error", ""))[:500]
        elif kind == "done":
            done = True
    return reported, done, load_error


def _status(outcome, *, done: bool, tests: list[R.TestResult], stderr: str) -> str:
    if outcome.timed_out:
        return R.TIMEOUT
    if outcome.output_exceeded:
        return R.OUTPUT_LIMIT
    if "MemoryError" in stderr or any("MemoryError" in t.error for t in tests):
        return R.MEMORY_LIMIT
    if not done or outcome.signal is not None or outcome.exit_code != 0:
        return R.CRASHED
    if tests and all(t.passed for t in tests):
        return R.OK
    return R.FAILED
