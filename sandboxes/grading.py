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

import functools
import json
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandboxes import result as R
from sandboxes.harness.python_check import split_check
from sandboxes.process import Limits, make_workspace, run_tree
from sandboxes.runtimes import RuntimeUnavailable, python_interpreter

log = logging.getLogger(__name__)
HARNESS_DIR = Path(__file__).parent / "harness"
SOLUTION_FILE = "solution.py"


@functools.lru_cache(maxsize=4)
def _harness_source(name: str) -> str:
    """A harness program with the plain-data codec's source in front (standard library only)."""
    return (HARNESS_DIR / "plaindata.py").read_text(encoding="utf-8") + "\n" + (HARNESS_DIR / name).read_text(encoding="utf-8")


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
    prompt: str = "",
    limits: Limits | None = None,
) -> R.ExecutionResult:
    """Execute ``program`` in one sandbox and the tests of ``test_source`` in another.

    The tests' ``candidate`` calls ``entry_point`` in the submission's sandbox over a
    pair of pipes; only plain data crosses (see ``harness/plaindata.py``). The
    submission's sandbox never holds the tests, the expected values or the report
    channel, so it can neither read nor forge them.

    Args:
        program: the full Python source under test (prompt plus completion).
        test_source: HumanEval-style source defining ``check(candidate)``.
        entry_point: the name of the function the tests call.
        prompt: the task's prompt, run on the tests' side for helpers the tests use.
        limits: resource limits of each sandbox; defaults to :class:`Limits`.

    Returns:
        An :class:`ExecutionResult` with one :class:`TestResult` per expected id;
        stdout, stderr, times and memory are the submission's. Launch failures come
        back as status ``infra_error``, never raised.
    """
    limits = limits or Limits()
    expected = expected_test_ids(test_source)
    try:
        workspace = make_workspace({SOLUTION_FILE: program})
    except OSError as exc:
        return R.ExecutionResult(status=R.INFRA_ERROR, detail=f"could not create workspace: {exc}")
    driver_dir = None
    try:
        driver_dir = make_workspace({})
        interpreter = python_interpreter()
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        runner_spec = {"solution_path": str(workspace / SOLUTION_FILE), "request_fd": request_r, "reply_fd": reply_w}
        driver_spec = {"tests": test_source, "prompt": prompt, "entry_point": entry_point,
                       "request_fd": request_w, "reply_fd": reply_r}
        # ``-I -S``: no environment, no user or site packages (the standard library
        # only, and a faster start). The harness programs travel as ``-c`` source and
        # the tests through stdin:
        # nothing of the grader lies in a workspace, and the sandbox user needs no
        # read access to the project's checkout (which may sit under a private home).
        with ThreadPoolExecutor(max_workers=2) as pool:
            runner_future = pool.submit(
                run_tree, [interpreter, "-I", "-S", "-c", _harness_source("python_runner.py")], cwd=workspace,
                stdin_for=lambda _fd: json.dumps(runner_spec).encode(), limits=limits, pass_fds=(request_r, reply_w),
            )
            driver_future = pool.submit(
                run_tree, [interpreter, "-I", "-S", "-c", _harness_source("python_check.py")], cwd=driver_dir,
                stdin_for=lambda fd: json.dumps({**driver_spec, "results_fd": fd}).encode(), limits=limits,
                pass_fds=(request_w, reply_r),
            )
            runner, driver = runner_future.result(), driver_future.result()
    except (OSError, RuntimeUnavailable) as exc:
        log.exception("sandbox launch failed")
        return R.ExecutionResult(status=R.INFRA_ERROR, detail=f"sandbox launch failed: {exc}")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        if driver_dir is not None:
            shutil.rmtree(driver_dir, ignore_errors=True)

    events = _parse_results(driver.results)
    reported = events["tests"]
    tests = [
        R.TestResult(id=tid, passed=reported.get(tid, (False, ""))[0], error=reported.get(tid, (False, "not reported"))[1])
        for tid in expected
    ]
    stderr = runner.stderr.decode("utf-8", "replace")
    status = _status(runner, driver, events=events, tests=tests, stderr=stderr)
    detail = events["load_error"] or events["submission_lost"] or ""
    if not events["done"] and not (runner.timed_out or driver.timed_out):
        detail = detail or "test driver ended early: " + driver.stderr.decode("utf-8", "replace")[-300:]
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
    )


def run_python_tests_retrying(*args, attempts: int = 2, **kwargs) -> R.ExecutionResult:
    """:func:`run_python_tests`, run again (up to ``attempts`` times in all) while the sandbox
    itself fails: an ``infra_error`` is the platform's fault, never the submission's."""
    for _attempt in range(attempts):
        result = run_python_tests(*args, **kwargs)
        if result.status != R.INFRA_ERROR:
            break
    return result


def _parse_results(raw: bytes) -> dict:
    """Read the driver's report: per-test results (first report wins) and its events."""
    events = {"tests": {}, "done": False, "load_error": None, "submission_lost": None}
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "test" and isinstance(event.get("id"), str) and event["id"] not in events["tests"]:
            events["tests"][event["id"]] = (event.get("passed") is True, str(event.get("error", ""))[:500])
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
    if runner.memory_limit_hit or "MemoryError" in stderr or any("MemoryError" in t.error for t in tests):
        return R.MEMORY_LIMIT
    if not events["done"] or events["submission_lost"] or runner.signal is not None:
        return R.CRASHED
    if tests and all(t.passed for t in tests):
        return R.OK
    return R.FAILED
