"""The judgement of repository validation when reference runs disagree: flaky, with the ids whose
outcome changed as evidence. (A pytest suite that disagrees with itself on demand cannot be
written without making this test flaky too, so the judgement is given gradings' results.)"""

import pytest

from sandboxes.repository import RepositoryResult
from tasks_library.models import TaskVersion
from tasks_library.repositories import repository_tasks_import
from tasks_library.validation.pipeline import verdict_of
from tasks_library.validation.repository import judge
from tests.tasks_library.repository_helpers import FAIL_TO_PASS, PASS_TO_PASS, record

IDS = FAIL_TO_PASS + PASS_TO_PASS


def result(per_id: dict, status: str = "ok") -> RepositoryResult:
    return RepositoryResult(status=status, per_id=per_id, wall_ms=100.0)


@pytest.mark.django_db
def test_reference_runs_that_disagree_make_the_version_flaky():
    repository_tasks_import([record()], author="alice")
    version = TaskVersion.objects.get()
    good = dict.fromkeys(IDS, "passed")
    wobbly = {**good, PASS_TO_PASS[1]: "failed"}
    empty = result({**good, FAIL_TO_PASS[0]: "failed"})
    judgement = judge(version, [result(good), result(wobbly), result(good)], empty)
    assert verdict_of(judgement.findings) == "flaky"
    assert judgement.report["reference"]["disagreeing_tests"] == [PASS_TO_PASS[1]]
    assert PASS_TO_PASS[1] in judgement.reasons[0]
    # The same runs agreeing: valid, with nothing to report.
    agreed = judge(version, [result(good)] * 3, empty)
    assert verdict_of(agreed.findings) == "valid" and agreed.reasons == []
    # A lost sandbox is an infrastructure error, never a verdict on the task.
    lost = judge(
        version, [result(good), result(dict.fromkeys(IDS, "missing"), "infra_error")], empty
    )
    assert verdict_of(lost.findings) == "infra_error"
