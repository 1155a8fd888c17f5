"""The verifier's side of output-based grading (the driver), run in a sandbox of its own.

For tasks whose verifier is not a unit test: the submission is a program that runs
as a script in its workspace (beside the task's files) and writes output files. This
driver asks the submission's sandbox for those files, as plain data, and judges them:

- ``output-match``: the suite is JSON ``{"outputs": [{"id", "file", ...}]}``; each
  entry is one test, compared as ``"json"`` (a value; numbers within ``tolerance``,
  absolute, or relative to the expected value's size), ``"number"`` (the file holds
  one number) or ``"text"`` (``normalize``: ``exact``, ``strip`` trailing spaces and
  blank lines, or ``unordered-lines``).
- ``custom-checker``: the suite is Python that defines ``FILES`` (the paths to fetch)
  and ``check(files) -> (score, reason)``, ``score`` in [0, 1]; one test, ``checker``,
  passed when the score is 1, and the score is reported.

The expected values and the checker live only here, never in the submission's
sandbox. Protocol: as ``python_check.py`` (``main(spec)`` with the same fds and events;
``spec["verifier"]`` names the kind); a test event may carry ``"score"``.
"""

import json
import math
import os
import sys

try:  # on the host (tests, id computation); in the sandbox plaindata's source is prepended
    from sandboxes.harness.plaindata import (
        decode,
        describe,
        driver_channels,
        dumps_line,
        read_greeting,
    )
except ImportError:
    pass

MAX_ERROR_CHARS = 500
MAX_REPLY_BYTES = 64 * 1024 * 1024
CHECKER_ID = "checker"


def output_ids(suite_source):
    """The test ids of an ``output-match`` suite, in order.

    Raises:
        ValueError: not JSON, no ``outputs`` list, an entry without ``id``/``file`` or
            with an unknown ``compare``, or a repeated id.
    """
    try:
        spec = json.loads(suite_source)
    except ValueError as exc:
        raise ValueError(f"output-match suite is not JSON: {exc}") from exc
    outputs = spec.get("outputs") if isinstance(spec, dict) else None
    if not isinstance(outputs, list) or not outputs:
        raise ValueError(
            'output-match suite needs {"outputs": [{"id", "file", "compare", "expected"}, ...]}'
        )
    ids = []
    for k, entry in enumerate(outputs):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("id"), str)
            or not isinstance(entry.get("file"), str)
        ):
            raise ValueError(f"outputs[{k}] needs string fields 'id' and 'file'")
        if entry.get("compare", "text") not in COMPARERS:
            raise ValueError(f"outputs[{k}]: compare must be one of {', '.join(sorted(COMPARERS))}")
        if "expected" not in entry:
            raise ValueError(f"outputs[{k}] has no 'expected'")
        if entry["id"] in ids:
            raise ValueError(f"outputs[{k}]: repeated id {entry['id']!r}")
        ids.append(entry["id"])
    return ids


def _close(actual, expected, tolerance):
    if isinstance(expected, bool) or not isinstance(expected, (int, float)):
        return False
    if isinstance(actual, bool) or not isinstance(actual, (int, float)) or math.isnan(actual):
        return False
    return abs(actual - expected) <= tolerance * max(1.0, abs(expected))


def _same(actual, expected, tolerance):
    """JSON values equal, numbers within tolerance (relative above 1, absolute below)."""
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(_same(actual[k], expected[k], tolerance) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_same(a, e, tolerance) for a, e in zip(actual, expected))
        )
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return _close(actual, expected, tolerance)
    return type(actual) is type(expected) and actual == expected


def _compare_json(text, entry):
    try:
        actual = json.loads(text)
    except ValueError as exc:
        return False, f"not JSON: {exc}"
    if _same(actual, entry["expected"], float(entry.get("tolerance", 0))):
        return True, ""
    return False, f"got {json.dumps(actual)[:200]}"


def _compare_number(text, entry):
    try:
        actual = float(text.strip())
    except ValueError:
        return False, f"not a number: {text[:100]!r}"
    if _close(actual, entry["expected"], float(entry.get("tolerance", 0))):
        return True, ""
    return (
        False,
        f"got {actual!r}, expected {entry['expected']!r} within {entry.get('tolerance', 0)}",
    )


def _normalized(text, how):
    if how == "strip":
        return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))
    if how == "unordered-lines":
        return sorted(line.rstrip() for line in text.split("\n") if line.strip())
    return text


def _compare_text(text, entry):
    how = entry.get("normalize", "strip")
    if _normalized(text, how) == _normalized(entry["expected"], how):
        return True, ""
    got, want = text.split("\n"), str(entry["expected"]).split("\n")
    for k, (a, b) in enumerate(zip(got, want)):
        if a.rstrip() != b.rstrip():
            return False, f"line {k + 1} differs: got {a[:100]!r}, expected {b[:100]!r}"
    return False, f"got {len(got)} lines, expected {len(want)}"


COMPARERS = {"json": _compare_json, "number": _compare_number, "text": _compare_text}


def main(spec):
    emit, requests, replies = driver_channels(spec)
    verifier = spec["verifier"]
    if verifier == "output-match":
        entries = json.loads(spec["tests"])["outputs"]
        paths = [entry["file"] for entry in entries]
    else:
        checker = {"__name__": "checker"}
        exec(compile(spec["tests"], "<checker>", "exec"), checker)
        paths = [str(p) for p in checker.get("FILES", [])]

    hello = read_greeting(replies, MAX_REPLY_BYTES)
    problem = None
    files = {}
    if "load_error" in hello:
        problem = str(hello["load_error"])[:MAX_ERROR_CHARS]
        emit(event="load_error", error=problem)
    else:
        try:
            requests.write(dumps_line({"read_files": paths}))
            requests.flush()
            line = replies.readline(MAX_REPLY_BYTES)
            reply = json.loads(line) if line.endswith(b"\n") else {}
            files = decode(reply["ok"]) if "ok" in reply else None
            if not isinstance(files, dict):
                problem = "the program's process did not return its output files"
                emit(event="submission_lost", error=problem)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problem = f"the program's process is gone: {describe(exc, MAX_ERROR_CHARS)}"
            emit(event="submission_lost", error=problem)

    if verifier == "output-match":
        for entry in entries:
            text = None if problem else files.get(entry["file"])
            if problem:
                passed, error = False, "not run: " + problem
            elif text is None:
                passed, error = False, f"the program wrote no {entry['file']}"
            else:
                try:
                    passed, error = COMPARERS[entry.get("compare", "text")](text, entry)
                except Exception as exc:  # noqa: BLE001 - a malformed expectation fails its test
                    passed, error = False, describe(exc, MAX_ERROR_CHARS)
            emit(event="test", id=entry["id"], passed=passed, error=error[:MAX_ERROR_CHARS])
    elif problem:
        emit(event="test", id=CHECKER_ID, passed=False, score=0.0, error="not run: " + problem)
    else:
        try:
            score, reason = checker["check"]({p: files.get(p) for p in paths})
            score = float(score)
            if not 0.0 <= score <= 1.0 or math.isnan(score):
                raise ValueError(f"check() returned score {score!r} outside [0, 1]")
            emit(
                event="test",
                id=CHECKER_ID,
                passed=score >= 1.0,
                score=score,
                error=str(reason)[:MAX_ERROR_CHARS],
            )
        except Exception as exc:  # noqa: BLE001 - a checker error is the checker's failure
            emit(
                event="test",
                id=CHECKER_ID,
                passed=False,
                score=0.0,
                error="checker failed: " + describe(exc, MAX_ERROR_CHARS),
            )
    emit(event="done")
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
