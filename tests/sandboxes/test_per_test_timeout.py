"""A suite's per-test timeout: the slow test fails, the tests after it still run."""

from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import python_tests, run_many

PROGRAM = "def f(n):\n    while n == 2:\n        pass\n    return n + 1\n"
TESTS = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
    "    assert candidate(3) == 4\n"
)


def test_a_slow_test_fails_alone_and_the_run_goes_on():
    limited, unlimited = run_many(
        [
            python_tests(
                PROGRAM, TESTS, "f", limits=Limits(wall_timeout_s=8, cpu_s=9, test_timeout_s=0.5)
            ),
            python_tests(PROGRAM, TESTS, "f", limits=Limits(wall_timeout_s=2, cpu_s=3)),
        ]
    )
    assert [t.passed for t in limited.tests] == [True, False, True]
    assert "ran past its time limit" in limited.tests[1].error
    assert limited.status == R.FAILED and limited.wall_ms < 4000
    # Without a per-test limit the same program holds the whole run until its wall limit.
    assert unlimited.status == R.TIMEOUT and [t.passed for t in unlimited.tests] == [
        True,
        False,
        False,
    ]
