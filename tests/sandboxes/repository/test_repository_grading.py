"""Grading a repository task by FAIL_TO_PASS and PASS_TO_PASS ids in a fresh session, and
running a whole suite on the same machinery (sandboxes/repository/grading.py)."""

from __future__ import annotations

import pytest

from sandboxes.repository import (
    grade_patch,
    grade_repository,
    id_status,
    make_patch,
    run_suite,
    run_suite_report,
)
from tests.environments import built
from tests.sandboxes.repository_fixture import BUGGY, FAIL_TO_PASS, FIXED, HIDDEN, TESTS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def environment():
    return built("python3.11-pytest").request_field()


def test_the_fix_resolves_every_id(session_pool, environment):
    result = grade_repository(FIXED, TESTS, environment=environment, runtime=session_pool.runtime)
    assert result.status == "ok", (result.detail, result.stdout_tail)
    assert result.per_id == dict.fromkeys(TESTS.ids, "passed")
    assert result.resolved and result.fraction == 1.0
    assert result.flags == [] and result.environment == environment["key"]


def test_the_buggy_state_fails_exactly_fail_to_pass(session_pool, environment):
    result = grade_repository(BUGGY, TESTS, environment=environment, runtime=session_pool.runtime)
    assert result.status == "ok", (result.detail, result.stdout_tail)
    assert {i for i, s in result.per_id.items() if s != "passed"} == set(FAIL_TO_PASS)
    assert set(result.per_id.values()) == {"passed", "failed"}
    assert not result.resolved and result.fraction == pytest.approx(4 / 7)
    assert "test_clamp_high[10]: failed" in result.detail
    assert set(result.messages) == set(FAIL_TO_PASS)
    assert result.messages[FAIL_TO_PASS[0]] == "assert 9 == 10"


def test_a_patch_is_graded_on_the_task_files(session_pool, environment):
    reference = make_patch(BUGGY, FIXED)
    result = grade_patch(
        BUGGY, reference, TESTS, environment=environment, runtime=session_pool.runtime
    )
    assert result.resolved, (result.detail, result.stdout_tail)
    empty = grade_patch(BUGGY, "", TESTS, environment=environment, runtime=session_pool.runtime)
    assert {i for i, s in empty.per_id.items() if s != "passed"} == set(FAIL_TO_PASS)
    stale = reference.replace("return high - 1", "return high - 2")
    refused = grade_patch(
        BUGGY, stale, TESTS, environment=environment, runtime=session_pool.runtime
    )
    assert refused.status == "failed" and refused.flags == ["patch_does_not_apply"]
    assert "calc/ops.py" in refused.detail and set(refused.per_id.values()) == {"error"}


def test_an_id_that_does_not_exist_is_missing(session_pool, environment):
    tests = type(TESTS)(
        fail_to_pass=("tests/test_ops.py::test_nothing_here", "tests/test_gone.py::test_x"),
        pass_to_pass=("tests/test_ops.py::test_add",),
        test_files=TESTS.test_files,
    )
    result = grade_repository(FIXED, tests, environment=environment, runtime=session_pool.runtime)
    assert result.per_id == {
        "tests/test_ops.py::test_nothing_here": "missing",
        "tests/test_gone.py::test_x": "missing",
        "tests/test_ops.py::test_add": "passed",
    }
    assert not result.resolved and result.fraction == pytest.approx(1 / 3)


def test_run_suite_reports_every_collected_id(session_pool, environment):
    suite = run_suite({**BUGGY, **HIDDEN}, environment=environment, runtime=session_pool.runtime)
    assert suite == {
        **dict.fromkeys(FAIL_TO_PASS, "failed"),
        "tests/test_clamp_bounds.py::test_clamp_low": "passed",
        "tests/test_ops.py::test_add": "passed",
        "tests/test_ops.py::test_clamp_inside": "passed",
        "tests/test_ops.py::test_mul": "passed",
    }
    broken = {**BUGGY, "tests/test_broken.py": b"import calc.nowhere\n"}
    report = run_suite_report(broken, environment=environment, runtime=session_pool.runtime)
    assert report.statuses["tests/test_broken.py"] == "error"
    assert "No module named 'calc.nowhere'" in report.messages["tests/test_broken.py"]
    assert report.statuses["tests/test_ops.py::test_add"] == "passed"


def test_a_task_plugin_loads_from_the_environment_never_the_workspace(session_pool, environment):
    uses_pytester = {
        **FIXED,
        "tests/test_ops.py": FIXED["tests/test_ops.py"]
        + b"\n\ndef test_pytester_is_there(pytester):\n    assert pytester.path.is_dir()\n",
    }
    ids = (*TESTS.pass_to_pass, "tests/test_ops.py::test_pytester_is_there")
    tests = type(TESTS)(
        fail_to_pass=TESTS.fail_to_pass,
        pass_to_pass=ids,
        test_files={p: c for p, c in uses_pytester.items() if p.startswith("tests/")},
        hidden_files=HIDDEN,
        test_command="pytest -p pytester",
    )
    result = grade_repository(
        uses_pytester, tests, environment=environment, runtime=session_pool.runtime
    )
    assert result.resolved, (result.detail, result.stdout_tail)
    # A plugin the environment lacks is not taken from a module the submission planted.
    planted = {**FIXED, "calc_plugin.py": b"def pytest_report_teststatus(report):\n    pass\n"}
    tests = type(TESTS)(**{**TESTS.__dict__, "test_command": "pytest -p calc_plugin"})
    result = grade_repository(planted, tests, environment=environment, runtime=session_pool.runtime)
    assert result.status == "failed" and not result.resolved
    assert "No module named 'calc_plugin'" in result.detail


def test_hidden_files_named_like_the_codes_own_files_do_not_block_it(session_pool, environment):
    # The hidden-test guard refuses reads of hidden files by name only when the path names no
    # other file: the package's own __init__.py and conftest-like names stay readable.
    package = {
        **FIXED,
        "calc/__init__.py": FIXED["calc/__init__.py"] + b"import calc.extra\n",
        "calc/extra/__init__.py": b"VALUE = open(__file__).read()\n",
    }
    hidden = {
        **HIDDEN,
        "tests/extra/__init__.py": b"",
        "tests/extra/test_extra.py": b"import calc.extra\n\n\ndef test_value():\n"
        b"    assert calc.extra.VALUE\n",
    }
    tests = type(TESTS)(
        **{
            **TESTS.__dict__,
            "hidden_files": hidden,
            "pass_to_pass": (*TESTS.pass_to_pass, "tests/extra/test_extra.py::test_value"),
        }
    )
    result = grade_repository(package, tests, environment=environment, runtime=session_pool.runtime)
    assert result.resolved and result.flags == [], (result.detail, result.stdout_tail)


def test_without_pytest_the_grading_is_an_infra_error(session_pool):
    result = grade_repository(FIXED, TESTS, runtime=session_pool.runtime)
    assert result.status == "infra_error" and "no pytest" in result.detail
    assert not result.resolved


@pytest.mark.parametrize(
    ("phases", "status"),
    [
        ({"setup": "passed", "call": "passed", "teardown": "passed"}, "passed"),
        ({"setup": "passed", "call": "passed"}, "missing"),
        ({"setup": "passed", "call": "passed", "teardown": "failed"}, "error"),
        ({"setup": "failed", "teardown": "passed"}, "error"),
        ({"setup": "skipped", "teardown": "passed"}, "skipped"),
        ({"setup": "passed", "call": "xfailed", "teardown": "passed"}, "xfailed"),
        ({"setup": "passed", "call": "xpassed", "teardown": "passed"}, "xpassed"),
        ({"setup": "passed", "call": "failed", "teardown": "passed"}, "failed"),
        ({}, "missing"),
    ],
)
def test_an_id_passes_only_when_every_phase_passed(phases, status):
    assert id_status(phases) == status
