"""The host compiles a suite once and the tests' sandbox runs that bytecode: same verdicts
as reading the source there, and bytecode from another interpreter version is never run."""

import base64
import gzip
import json
import marshal
import sys

import pytest

from sandboxes import grading
from sandboxes import result as R
from sandboxes.grading import PythonGrader, compiled_suite
from sandboxes.harness import python_check
from tasks_library.importers.humaneval import default_path

TESTS = """
import math

LIMIT = 3

def check(candidate):
    assert candidate(1) == 2
    x = LIMIT
    assert candidate(x) == 4
    for i in range(LIMIT):
        assert candidate(i) == helper(i)
    assert math.isclose(candidate(0.5), 1.5)
"""
PROMPT = "def helper(n):\n    return n + 1\n\ndef inc(n):\n    pass\n"


@pytest.fixture(scope="module")
def grader():
    grader = PythonGrader()
    yield grader
    grader.close()


def _verdicts(result: R.ExecutionResult) -> tuple:
    return result.status, [(t.id, t.passed, t.error) for t in result.tests]


def test_compiled_suite_splits_as_the_source_does():
    prompt_code, setup_code, pairs = python_check.compile_suite(TESTS, PROMPT)
    assert [test_id for test_id, _code in pairs] == [
        test_id for test_id, _stmt in python_check.split_check(TESTS)
    ]
    assert grading.expected_test_ids(TESTS) == [t for t, _c in pairs if t is not None]
    namespace: dict = {}
    exec(prompt_code, namespace)
    exec(setup_code, namespace)
    assert namespace["LIMIT"] == 3 and namespace["helper"](1) == 2 and "check" not in namespace


def test_a_prompt_that_does_not_compile_is_left_out():
    prompt_code, _setup, _pairs = python_check.compile_suite(TESTS, "def unfinished(:\n")
    assert prompt_code is None


def test_bytecode_of_another_interpreter_is_not_run():
    suite = compiled_suite(TESTS, PROMPT)
    assert suite["tag"] == sys.implementation.cache_tag
    assert python_check._load_compiled(suite) is not None
    assert python_check._load_compiled(dict(suite, tag="cpython-26")) is None
    assert python_check._load_compiled(None) is None


def test_a_suite_that_does_not_compile_is_sent_as_source():
    assert compiled_suite("def check(candidate):\n    assert candidate(\n", "") is None
    assert compiled_suite("x = 1\n", "") is None  # no check(): the sandbox reports it


def test_a_large_suite_is_parsed_in_the_sandbox(grader):
    """Not compiled or cached on the host (its memory stays bounded), still graded the same."""
    data = f"DATA = {list(range(60_000))!r}\n"
    large = data + TESTS
    assert len(large) > grading.COMPILED_SUITE_MAX_CHARS
    assert compiled_suite(large, PROMPT) is None
    result = grader.grade("def inc(n):\n    return n + 1\n", large, "inc", prompt=PROMPT)
    assert result.status == R.OK and len(result.tests) == 4


@pytest.mark.parametrize(
    "program",
    [
        "def inc(n):\n    return n + 1\n",  # passes
        "def inc(n):\n    return 2 if n == 1 else n + 1.5\n",  # fails some
        "def inc(n):\n    raise SystemExit(0)\n",  # exits in a call
        "import sys\nsys.exit(0)\n",  # exits while loading
    ],
)
def test_compiled_and_source_paths_give_the_same_verdicts(grader, program, monkeypatch):
    compiled = grader.grade(program, TESTS, "inc", prompt=PROMPT)
    monkeypatch.setattr(grading, "compiled_suite", lambda *_args: None)
    from_source = grader.grade(program, TESTS, "inc", prompt=PROMPT)
    assert _verdicts(compiled) == _verdicts(from_source)


def test_stale_bytecode_falls_back_to_the_source_in_the_sandbox(grader, monkeypatch):
    """Bytecode that would pass everything, under a tag the sandbox's interpreter does not
    have: the sandbox must ignore it and grade the real tests (which fail here)."""
    lenient = python_check.compile_suite(
        "def check(candidate):\n    assert True\n    assert True\n"
        "    assert True\n    assert True\n    assert True\n    assert True\n",
        "",
    )
    forged = {"tag": "cpython-0", "code": base64.b64encode(marshal.dumps(lenient)).decode()}
    monkeypatch.setattr(grading, "compiled_suite", lambda *_args: forged)
    result = grader.grade("def inc(n):\n    return 0\n", TESTS, "inc", prompt=PROMPT)
    assert result.status == R.FAILED
    assert len(result.tests) == 4 and not any(t.passed for t in result.tests)


def test_humaneval_references_pass_through_the_compiled_path(grader):
    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for line in handle][:20]
    for problem in problems:
        assert compiled_suite(problem["test"], problem["prompt"]) is not None
        result = grader.grade(
            problem["prompt"] + problem["canonical_solution"],
            problem["test"],
            problem["entry_point"],
            prompt=problem["prompt"],
        )
        assert result.status == R.OK, (problem["task_id"], result.detail, result.stderr[-300:])


def test_the_submission_keeps_standard_streams_with_their_error_handlers(grader):
    """stdout/stderr are made once in the zygote: a tree still writes its own, and text
    that is not valid UTF-8 is replaced (stdout) or escaped (stderr), not a crash."""
    program = (
        "import sys\nprint('out \\udce9')\nprint('err \\udce9', file=sys.stderr)\n"
        "print(sys.stdin.read() == '')\ndef inc(n):\n    return n + 1\n"
    )
    result = grader.grade(program, TESTS, "inc", prompt=PROMPT)
    assert result.status == R.OK
    assert result.stdout == "out ?\nTrue\n"
    assert "err \\udce9" in result.stderr
    again = grader.grade("def inc(n):\n    return n + 1\n", TESTS, "inc", prompt=PROMPT)
    assert again.stdout == "" and again.stderr == ""  # nothing buffered crosses to the next tree
