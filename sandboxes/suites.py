"""Test-suite harnesses: how a suite's tests are counted, which runtime grades them, and
what a trivial solution looks like. A task's test suite names its harness
(``TestSuiteVersion.harness``); everything that grades a task goes through here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from sandboxes import grading, javascript
from sandboxes import queue as Q


@dataclass(frozen=True)
class Harness:
    """One way of running tests.

    Attributes:
        runtime: the sandbox runtime (``sandbox_worker --runtime``).
        expected_ids: test source -> the test ids it holds, in order.
        request: builds the queue request (see :mod:`sandboxes.queue`); takes the suite's
            ``setup`` code as a keyword (refused by the harnesses not in
            :data:`SETUP_HARNESSES` when it is not empty).
        trivial: prompt -> a solution that does nothing (a suite it passes cannot fail).
    """

    runtime: str
    expected_ids: Callable[[str], list[str]]
    request: Callable[..., dict]
    trivial: Callable[[str], str]


def _repository_suite(*_args, **_kwargs):
    raise ValueError(
        "a pytest-repo suite is a repository's own pytest suite: its ids are the task's "
        "FAIL_TO_PASS and PASS_TO_PASS lists and sandboxes.repository grades it"
    )


def _terminal_suite(*_args, **_kwargs):
    raise ValueError(
        "a terminal suite is a task's verifier (tests/test.sh writing a reward): it runs on a "
        "final state in a session (sandboxes.sessions.terminal.run_verifier), one test, "
        "'verifier', scored with the reward"
    )


HARNESSES = {
    # HumanEval's check(candidate): one test per assert-bearing statement.
    "python-check": Harness(
        "python", grading.expected_test_ids, Q.python_tests, lambda prompt: prompt
    ),
    # HumanEval-X JavaScript: one test per console.assert call site. The prompt ends
    # inside the function's body, so closing it gives an empty body.
    "js-console-assert": Harness(
        "node", javascript.expected_test_ids, Q.javascript_tests, lambda prompt: prompt + "\n}\n"
    ),
    # Verifiers beyond unit tests: the program runs as a script beside the task's files;
    # its output files are compared with expected values (numbers within a tolerance),
    # or judged by the task's checker script, in a sandbox of their own. A script that
    # is only the prompt (a docstring) writes nothing and so fails.
    "output-match": Harness(
        "python",
        functools.partial(grading.verifier_test_ids, "output-match"),
        functools.partial(Q.python_tests, verifier="output-match"),
        lambda prompt: prompt,
    ),
    "custom-checker": Harness(
        "python",
        functools.partial(grading.verifier_test_ids, "custom-checker"),
        functools.partial(Q.python_tests, verifier="custom-checker"),
        lambda prompt: prompt,
    ),
    # Standard input to standard output (competitive programming): the program runs as a
    # script afresh for each case, fed its input; its output is compared (exactly, with
    # whitespace normalised, or numbers within a tolerance) in the tests' sandbox. One test
    # per case. A prompt alone (a docstring) prints nothing and so fails.
    "stdio": Harness(
        "python",
        functools.partial(grading.verifier_test_ids, "stdio"),
        functools.partial(Q.python_tests, verifier="stdio"),
        lambda prompt: prompt,
    ),
    # A repository's own pytest suite, graded per FAIL_TO_PASS and PASS_TO_PASS node id by
    # sandboxes.repository (grade_repository, in a session of its own): no program, no test
    # source, so neither counts ids from text nor builds a queue request.
    "pytest-repo": Harness("python", _repository_suite, _repository_suite, lambda prompt: ""),
    # A terminal task's verifier (Harbor's tests/test.sh) on the final state of a machine.
    "terminal": Harness("python", _terminal_suite, _terminal_suite, lambda prompt: ""),
}
# Harnesses whose suites may carry setup code (``TestSuiteVersion.setup_code``), and those
# whose suites may set a per-test time limit (``test_timeout_s``: per call, or per case).
SETUP_HARNESSES = ("python-check",)
PER_TEST_TIMEOUT_HARNESSES = ("python-check", "stdio")


def harness(name: str) -> Harness:
    """The harness called ``name``.

    Raises:
        ValueError: no such harness (the message lists the known ones).
    """
    try:
        return HARNESSES[name]
    except KeyError:
        raise ValueError(
            f"unknown test harness {name!r}; known: {', '.join(sorted(HARNESSES))}"
        ) from None
