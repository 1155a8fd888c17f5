"""import_tasks repo-bugs: tasks generated from a real project are imported as repository task
versions with counts and time per task; bad input gets a clear error and writes nothing."""

import pytest
from django.core.management import CommandError

from tasks_library.models import Task, TaskVersion
from tests.tasks_library.repo_bugs_helpers import (
    CALC,
    PKG_INFO,
    import_one_inflection_task,
    import_repo_bugs,
    sdist,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_the_command_imports_generated_tasks_with_counts_and_time(settings, tmp_path):
    settings.SDIST_CACHE = tmp_path
    report = import_one_inflection_task()
    assert report["tasks"] == report["imported"] == report["new_versions"] == 1
    assert report["seconds_per_task"] > 0 and report["licence"] == "MIT"
    assert report["verdicts"] == {"valid": 1} and report["validation_seconds_per_task"] > 0
    assert report["task_set"] == "repo-bugs-inflection-0.5.1"
    version = TaskVersion.objects.get()
    assert version.is_repository and version.task.licence == "MIT"
    assert version.verdict == "valid" and not version.quarantined
    assert version.test_suite.fail_to_pass and version.test_suite.pass_to_pass
    assert version.environment.packages == ["pytest==8.3.4"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "--package NAME==VERSION"),
        (("--package", "inflection"), "give one exact version"),
        (("--package", "inflection==0.5.1", "--count", "0"), "--count: must be an integer from 1"),
        (
            ("--package", "inflection==0.5.1", "--reference-runs", "0"),
            "--reference-runs: must be an integer",
        ),
        (("--package", "inflection==99.0.0"), "no source distribution of that name and version"),
        (("--package", "calc==1.0"), "calc==1.0: its sdist carries no test modules"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(settings, tmp_path, args, words):
    settings.SDIST_CACHE = tmp_path
    sdist(tmp_path / "calc-1.0.tar.gz", {"PKG-INFO": PKG_INFO, "calc.py": CALC}, top="calc-1.0")
    with pytest.raises(CommandError, match=words):
        import_repo_bugs(*args)
    assert not Task.objects.exists()


def test_a_suite_that_fails_on_the_pristine_project_is_refused(settings, tmp_path):
    settings.SDIST_CACHE = tmp_path
    failing = b"from calc import mean\n\n\ndef test_mean():\n    assert mean([1, 2]) == 2\n"
    sdist(
        tmp_path / "calc-1.0.tar.gz",
        {"PKG-INFO": PKG_INFO, "calc/__init__.py": CALC, "tests/test_calc.py": failing},
        top="calc-1.0",
    )
    with pytest.raises(CommandError, match="none of its 1 tests passes on the pristine project"):
        import_repo_bugs("--package", "calc==1.0")
    assert not Task.objects.exists()
