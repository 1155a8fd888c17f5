"""The main job validates the task versions no validation has judged yet: a second ``up`` with
nothing changed validates none of them (it once validated all 164 again, 35 s), a changed task's
new version is validated, and every other keeps its verdict and report."""

import pytest

from console.management.commands.up import humaneval_validated
from tasks_library.importers.humaneval import read_humaneval
from tasks_library.models import TaskVersion

pytestmark = pytest.mark.django_db


def test_a_second_run_validates_only_the_new_version(humaneval, write_jsonl):
    said = []
    rows = humaneval[:3]

    def records(rows):
        return list(read_humaneval(write_jsonl(rows)))

    _report, versions = humaneval_validated(records(rows), say=said.append)
    assert {v.verdict for v in versions} != {TaskVersion.VERDICT_PENDING}
    assert "validated 3 task versions" in said[-1]
    before = dict(TaskVersion.objects.values_list("pk", "validated_at"))

    _report, versions = humaneval_validated(records(rows), say=said.append)
    assert "validated 0 task versions" in said[-1] and "3 kept their verdicts" in said[-1]
    assert dict(TaskVersion.objects.values_list("pk", "validated_at")) == before

    changed = [dict(rows[0], prompt=rows[0]["prompt"] + "    # a changed prompt\n"), *rows[1:]]
    _report, versions = humaneval_validated(records(changed), say=said.append)
    assert "validated 1 task versions" in said[-1] and "2 kept their verdicts" in said[-1]
    new = TaskVersion.objects.get(task__task_id=rows[0]["task_id"], number=2)
    assert new.validated_at is not None and new.verdict != TaskVersion.VERDICT_PENDING
    kept = TaskVersion.objects.filter(number=1).values_list("pk", "validated_at")
    assert all(before[pk] == at for pk, at in kept)
