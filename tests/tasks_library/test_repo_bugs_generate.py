"""Repository tasks generated from a real project (inflection 0.5.1, fetched with pip): every
list measured by running the suite, the reference patch resolves each task in the repository
grader and the empty patch does not, the same seed gives the same tasks."""

import pytest

from sandboxes.repository import RepositoryTests, apply_patch, grade_repository, is_test_path
from sandboxes.repository.patches import patched_paths
from tasks_library.generators.repo_bugs import generate
from tasks_library.generators.sdists import fetch, read_project
from tests.environments import built

pytestmark = pytest.mark.slow
PIN = "inflection==0.5.1"


@pytest.fixture(scope="module")
def environment():
    return built("python3.11-pytest").request_field()


@pytest.fixture(scope="module")
def generated(environment, tmp_path_factory):
    cache = tmp_path_factory.mktemp("sdists")
    return generate(
        PIN, count=2, seed=0, max_failing=40, environment=environment, cache_dir=cache
    ), cache


def test_tasks_carry_measured_lists_the_licence_and_a_one_file_fix(generated):
    report, cache = generated
    pristine = read_project(fetch(PIN, cache_dir=cache)).files
    assert len(report.records) == 2 and report.pristine_passing == report.suite_tests == 455
    for record in report.records:
        assert 1 <= len(record.fail_to_pass) <= 40 and record.pass_to_pass
        assert not set(record.fail_to_pass) & set(record.pass_to_pass)
        assert record.licence == "MIT" and record.metadata["licence_files"] == ["LICENSE"]
        assert patched_paths(record.reference_patch) == ["inflection/__init__.py"]
        assert apply_patch(record.files, record.reference_patch) == pristine
        assert record.test_command == "pytest -o pythonpath=."
        assert record.environment["packages"] == ["pytest==8.3.4"]


def test_the_grader_resolves_the_reference_and_not_the_empty_patch(generated, environment):
    report, _cache = generated
    for record in report.records:
        tests = RepositoryTests(
            fail_to_pass=tuple(record.fail_to_pass),
            pass_to_pass=tuple(record.pass_to_pass),
            test_files={p: c for p, c in record.files.items() if is_test_path(p)},
            test_command=record.test_command,
        )
        fixed = apply_patch(record.files, record.reference_patch)
        assert grade_repository(fixed, tests, environment=environment).resolved
        empty = grade_repository(record.files, tests, environment=environment)
        assert empty.status == "ok" and not empty.resolved
        assert all(empty.per_id[i] != "passed" for i in record.fail_to_pass)
        assert all(empty.per_id[i] == "passed" for i in record.pass_to_pass)


def test_the_statement_shows_the_failures_not_the_fix(generated):
    report, _cache = generated
    for record in report.records:
        statement = record.problem_statement
        for node_id in record.fail_to_pass:
            assert node_id in statement
        assert "Error" in statement or "assert" in statement  # the observed failure
        bug = record.metadata["bug"]
        assert bug["description"] not in statement and f"line {bug['line']}" not in statement
        assert "def test_" not in statement  # no test source pasted


def test_the_same_seed_gives_the_same_tasks(generated, environment):
    report, cache = generated
    again = generate(PIN, count=1, seed=0, max_failing=40, environment=environment, cache_dir=cache)
    first, repeat = report.records[0], again.records[0]
    assert (repeat.task_id, repeat.reference_patch) == (first.task_id, first.reference_patch)
    assert (repeat.fail_to_pass, repeat.pass_to_pass) == (first.fail_to_pass, first.pass_to_pass)
