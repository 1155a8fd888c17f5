"""The ``stdio`` verifier's side of grading (the driver), run in a sandbox of its own.

For programs that read standard input and write standard output (the shape of
competitive-programming tasks): the submission's sandbox runs the program as a script,
afresh for each case, on that case's input (see ``python_runner.py``); this driver sends
one case's input at a time, gets back what the program wrote, and compares it with the
expected output, which never leaves this sandbox. One test id per case.

The suite is JSON::

    {"compare": "whitespace", "tolerance": 1e-6,
     "cases": [{"id": "case_0", "input": "3\\n1 2 3\\n", "output": "6\\n"}, ...]}

``compare`` (per suite; default ``whitespace``):

- ``exact``: the output is the expected text, character for character;
- ``whitespace``: line by line, each line's runs of spaces and tabs count as one space,
  leading and trailing ones and ``\\r`` are ignored, as are blank lines at the end;
- ``float``: the outputs' whitespace-separated tokens pair up; a pair of numbers is equal
  within ``tolerance`` (absolute up to 1, relative to the expected value's size above), any
  other pair only as the same text.

A case fails when the program crashed (a non-zero exit status, a signal), ran past the
per-case time limit (``spec["test_timeout_s"]``, else the suite's whole timeout), wrote
more than the runner's output cap, or wrote something else. ``id`` is optional (default
``case_<k>``). Protocol: as ``python_check.py`` (``main(spec)``, the same fds and events).
"""

import json
import math
import re
import sys

try:  # on the host (tests, id computation); in the sandbox plaindata's source is prepended
    from sandboxes.harness.plaindata import (
        describe,
        driver_channels,
        driver_done,
        dumps_line,
        read_greeting,
    )
except ImportError:
    pass

MAX_ERROR_CHARS = 500
MAX_REPLY_BYTES = 64 * 1024 * 1024
COMPARE_MODES = ("exact", "whitespace", "float")
DEFAULT_TOLERANCE = 1e-6
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def stdio_suite(source):
    """The suite as ``(cases, compare, tolerance)``; each case ``{"id", "input", "output"}``.

    Raises:
        ValueError: not JSON, no non-empty ``cases`` list, a case whose ``input`` or
            ``output`` is not text, a repeated or non-text id, an unknown ``compare`` or a
            ``tolerance`` that is not a number >= 0 (the message names the place).
    """
    try:
        suite = json.loads(source)
    except ValueError as exc:
        raise ValueError(f"stdio suite is not JSON: {exc}") from None
    cases = suite.get("cases") if isinstance(suite, dict) else None
    if not isinstance(cases, list) or not cases:
        raise ValueError('stdio suite needs {"cases": [{"input": ..., "output": ...}, ...]}')
    compare = suite.get("compare", "whitespace")
    if compare not in COMPARE_MODES:
        raise ValueError(f"stdio suite: compare must be one of {', '.join(COMPARE_MODES)}")
    tolerance = suite.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise ValueError("stdio suite: tolerance must be a number >= 0")
    checked, seen = [], set()
    for k, case in enumerate(cases):
        if not isinstance(case, dict):
            raise ValueError(f"cases[{k}] must be an object with input and output")
        for key in ("input", "output"):
            if not isinstance(case.get(key), str):
                raise ValueError(f"cases[{k}].{key} must be text")
        case_id = case.get("id", f"case_{k}")
        if not isinstance(case_id, str) or not case_id:
            raise ValueError(f"cases[{k}].id must be non-empty text")
        if case_id in seen:
            raise ValueError(f"cases[{k}]: repeated id {case_id!r}")
        seen.add(case_id)
        checked.append({"id": case_id, "input": case["input"], "output": case["output"]})
    return checked, compare, float(tolerance)


def stdio_ids(source):
    """The test ids of a ``stdio`` suite, in order (raises as :func:`stdio_suite`)."""
    return [case["id"] for case in stdio_suite(source)[0]]


def _lines(text):
    lines = [" ".join(line.split()) for line in text.replace("\r", "").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _number_close(got, want, tolerance):
    if not (NUMBER.fullmatch(got) and NUMBER.fullmatch(want)):
        return False
    a, b = float(got), float(want)
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def compare_output(got, want, compare="whitespace", tolerance=DEFAULT_TOLERANCE):
    """``(equal, why not)`` of a program's output ``got`` and the expected ``want``."""
    if compare == "exact":
        if got == want:
            return True, ""
        at = next(
            (k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))
        )
        near = slice(max(0, at - 20), at + 20)
        return False, f"differs at character {at}: got {got[near]!r}, expected {want[near]!r}"
    if compare == "float":
        tokens, expected = got.split(), want.split()
        for k, (a, b) in enumerate(zip(tokens, expected)):
            if a != b and not _number_close(a, b, tolerance):
                why = f"token {k + 1} differs: got {a[:100]!r}, expected {b[:100]!r}"
                return False, f"{why} (tolerance {tolerance:g})"
        if len(tokens) != len(expected):
            return False, f"got {len(tokens)} tokens, expected {len(expected)}"
        return True, ""
    lines, expected = _lines(got), _lines(want)
    for k, (a, b) in enumerate(zip(lines, expected)):
        if a != b:
            return False, f"line {k + 1} differs: got {a[:100]!r}, expected {b[:100]!r}"
    if len(lines) != len(expected):
        return False, f"got {len(lines)} lines, expected {len(expected)}"
    return True, ""


def _judge(outcome, case, compare, tolerance, timeout_s):
    """``(passed, error)`` of one case from the runner's report (hostile: types checked)."""
    if not isinstance(outcome, dict) or not isinstance(outcome.get("stdout"), str):
        return False, "the program's process sent no output for this case"
    stderr = str(outcome.get("stderr", ""))[-300:]
    if outcome.get("timed_out") is True:
        return False, f"time limit exceeded ({timeout_s} s)"
    if outcome.get("output_exceeded") is True:
        return False, "output limit exceeded"
    signum = outcome.get("signal")
    if isinstance(signum, int) and not isinstance(signum, bool):
        return False, f"killed by signal {signum}: {stderr}"
    status = outcome.get("exit")
    if status != 0 or isinstance(status, bool):
        return False, f"runtime error (exit status {status}): {stderr}"
    return compare_output(outcome["stdout"], case["output"], compare, tolerance)


def main(spec):
    emit, requests, replies = driver_channels(spec)
    cases, compare, tolerance = stdio_suite(spec["tests"])
    timeout_s = spec.get("test_timeout_s")
    hello = read_greeting(replies, MAX_REPLY_BYTES)
    problem = None
    if "load_error" in hello:
        problem = str(hello["load_error"])[:MAX_ERROR_CHARS]
        emit(event="submission_lost" if hello.get("lost") else "load_error", error=problem)
    for case in cases:
        if problem is not None:
            emit(event="test", id=case["id"], passed=False, error="not run: " + problem)
            continue
        try:
            requests.write(dumps_line({"stdin": case["input"], "timeout_s": timeout_s}))
            requests.flush()
            line = replies.readline(MAX_REPLY_BYTES)
            if not line.endswith(b"\n"):
                raise OSError("no reply")
            reply = json.loads(line)
        except (OSError, ValueError) as exc:
            problem = "the program's process is gone: " + describe(exc, MAX_ERROR_CHARS)
            emit(event="submission_lost", error=problem)
            emit(event="test", id=case["id"], passed=False, error=problem)
            continue
        if not isinstance(reply, dict) or "ok" not in reply:
            error = reply.get("error") if isinstance(reply, dict) else None
            message = error.get("message", "") if isinstance(error, dict) else ""
            passed, why = False, f"the case did not run: {str(message)[:300]}"
        else:
            try:
                passed, why = _judge(reply["ok"], case, compare, tolerance, timeout_s)
            except Exception as exc:  # noqa: BLE001 - a report that cannot be judged fails its case
                passed, why = False, describe(exc, MAX_ERROR_CHARS)
        emit(event="test", id=case["id"], passed=passed is True, error=why[:MAX_ERROR_CHARS])
    driver_done(emit, requests)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
