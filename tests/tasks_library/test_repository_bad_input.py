"""Bad repository task records: a clear error naming the record and the field, nothing written."""

import pytest

from tasks_library.importers import ImportFormatError
from tasks_library.models import RepositoryWorkspace, Task, TaskVersion, TestSuiteVersion
from tasks_library.repositories import repository_tasks_import
from tests.tasks_library.repository_helpers import BUGGY, record

BAD = {
    "a patch that does not apply": (
        dict(reference_patch=record().reference_patch.replace("return max(low, x)", "return 0")),
        "reference_patch",
        "patch does not apply",
    ),
    "a patch that is not a diff": (
        dict(reference_patch="just some words\n"),
        "reference_patch",
        "not a unified diff",
    ),
    "a test id whose file does not exist": (
        dict(fail_to_pass=["tests/test_nowhere.py::test_x"]),
        "fail_to_pass",
        "'tests/test_nowhere.py::test_x'",
    ),
    "the lists as a string": (
        dict(pass_to_pass="tests/test_ops.py::test_add"),
        "pass_to_pass",
        "expected a list of pytest node ids",
    ),
    "no FAIL_TO_PASS id": (dict(fail_to_pass=[]), "fail_to_pass", "empty"),
    "an id in both lists": (
        dict(pass_to_pass=["tests/test_ops.py::test_clamp_above"]),
        "pass_to_pass",
        "is in FAIL_TO_PASS too",
    ),
    "a path that climbs out": (
        dict(files={**BUGGY, "../evil.py": b"x"}),
        "files",
        "'..'",
    ),
    "an environment without pytest": (
        dict(environment={"name": "bare", "runtime": "python3.11", "packages": []}),
        "environment.packages",
        "must pin it",
    ),
    "a test command that is not pytest": (
        dict(test_command="bash -c 'echo PASSED'"),
        "test_command",
        "must start with 'pytest'",
    ),
    "a test command setting the grading's own options": (
        dict(test_command="pytest -p evil_plugin"),
        "test_command",
        "which the grading sets itself",
    ),
    "an empty problem statement": (dict(problem_statement="  "), "problem_statement", "empty"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_record_names_record_and_field_and_writes_nothing(case):
    changes, field, words = BAD[case]
    good = record("calc/good")
    with pytest.raises(ImportFormatError) as caught:
        repository_tasks_import([good, record("calc/bad", **changes)], author="alice")
    assert caught.value.field == field
    message = str(caught.value)
    assert message.startswith("record 2 (calc/bad): ") and f"field '{field}" in message
    assert words in message
    # The good record before it is rolled back with it.
    assert not Task.objects.exists() and not TaskVersion.objects.exists()
    assert not TestSuiteVersion.objects.exists() and not RepositoryWorkspace.objects.exists()
