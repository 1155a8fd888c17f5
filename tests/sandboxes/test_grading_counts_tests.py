"""A pass needs every expected test reported passed: exits, crashes and forgeries fail."""

import pytest

from sandboxes import result as R
from sandboxes.grading import expected_test_ids, run_python_tests
from sandboxes.process import Limits

TESTS = """
def check(candidate):
    assert candidate(1) == 2
    x = 3
    assert candidate(x) == 4
    for i in range(3):
        assert candidate(i) == i + 1
"""
GOOD = "def inc(n):\n    return n + 1\n"


def grade(program: str, **limits):
    return run_python_tests(program, TESTS, "inc", limits=Limits(**limits) if limits else None)


def test_expected_ids_count_assert_statements():
    assert expected_test_ids(TESTS) == ["assert_0", "assert_1", "assert_2"]


def test_correct_program_passes_every_test():
    result = grade(GOOD)
    assert result.status == R.OK
    assert [t.passed for t in result.tests] == [True, True, True]


def test_wrong_program_fails_only_the_tests_it_fails():
    result = grade("def inc(n):\n    return 2 if n == 1 else 0\n")
    assert result.status == R.FAILED
    assert [t.passed for t in result.tests] == [True, False, False]


@pytest.mark.parametrize(
    "program",
    [
        "import sys\nsys.exit(0)\n" + GOOD,
        "raise SystemExit(0)\n" + GOOD,
        "import os\ndef inc(n):\n    os._exit(0)\n",
        "def inc(n):\n    raise SystemExit(0)\n",
        "import unittest\ndef inc(n):\n    raise unittest.SkipTest('skip')\n",
        "def inc(n):\n    return n +\n",  # syntax error
        "import os, signal\ndef inc(n):\n    os.kill(os.getpid(), signal.SIGSEGV)\n",
    ],
    ids=[
        "sys-exit",
        "raise-systemexit",
        "os-exit-in-call",
        "systemexit-in-call",
        "skiptest",
        "syntax-error",
        "segfault",
    ],
)
def test_exits_crashes_and_skips_never_pass(program):
    result = grade(program)
    assert result.status != R.OK
    assert not any(t.passed for t in result.tests)


def test_forged_result_lines_without_the_nonce_are_ignored():
    forged = (
        "import os, json\n"
        "for fd in range(3, 20):\n"
        "    try:\n"
        "        os.write(fd, (json.dumps({'event': 'test', 'id': 'assert_%d' % 0, "
        "'passed': True, 'nonce': 'x'}) + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = grade(forged)
    assert result.status == R.CRASHED
    assert result.tests_passed == 0


def test_infinite_loop_times_out_and_fails():
    result = grade("def inc(n):\n    while True:\n        pass\n", wall_timeout_s=1.5, cpu_s=5)
    assert result.status == R.TIMEOUT
    assert result.tests_passed == 0
    assert result.wall_ms < 5000


def test_output_flood_is_capped_and_flagged():
    result = grade(
        "def inc(n):\n    while True:\n        print('x' * 10000)\n", output_kill_bytes=1024 * 1024
    )
    assert result.status == R.OUTPUT_LIMIT
    assert result.truncated
    assert len(result.stdout) <= Limits().output_cap_bytes
