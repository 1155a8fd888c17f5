"""repository_tasks_import: records become versioned, content-addressed repository tasks whose
workspace is stored once per distinct tree."""

import pytest

from sandboxes.repository.patches import make_patch
from sandboxes.sessions.workspace import Workspace
from tasks_library.models import RepositoryWorkspace, TaskSet, TaskVersion
from tasks_library.repositories import HARNESS, repository_tasks_import
from tests.tasks_library.repository_helpers import (
    BUGGY,
    FAIL_TO_PASS,
    FIXED,
    HIDDEN,
    PASS_TO_PASS,
    record,
)


@pytest.mark.django_db
def test_a_record_becomes_a_repository_task_version():
    report = repository_tasks_import(
        [record(hidden_files=dict(HIDDEN))], author="alice", task_set_name="calc"
    )
    assert (report.tasks, report.new_versions, report.unchanged) == (1, 1, 0)
    version = TaskVersion.objects.get(task__task_id="calc/clamp-1")
    assert version.is_repository and version.number == 1 and version.author == "alice"
    assert version.prompt.startswith("clamp(50, 0, 10) returns 50")
    assert version.reference_solution.startswith("diff --git a/calc/ops.py b/calc/ops.py")
    assert version.entry_point == ""
    assert version.workspace.files() == dict(sorted(BUGGY.items()))
    assert version.workspace.digest == Workspace.from_files(BUGGY).digest
    suite = version.test_suite
    assert suite.harness == HARNESS
    assert suite.fail_to_pass == FAIL_TO_PASS and suite.pass_to_pass == PASS_TO_PASS
    assert suite.hidden_test_ids == FAIL_TO_PASS + PASS_TO_PASS
    assert suite.hidden_files.files() == HIDDEN
    assert suite.test_command == "pytest" and suite.timeout_s == 120.0
    assert version.environment.packages == ["pytest==8.3.4"]
    assert version.environment.runtime == "python3.11"
    assert version.task.licence == "MIT"
    assert version.task.metadata["bug"] == "clamp upper bound dropped"
    assert [v.task.task_id for v in TaskSet.objects.get(name="calc").task_versions.all()] == [
        "calc/clamp-1"
    ]


@pytest.mark.django_db
def test_reimport_is_idempotent_and_a_change_makes_version_two():
    repository_tasks_import([record()], author="alice")
    first = TaskVersion.objects.get()
    again = repository_tasks_import([record()], author="alice")
    assert (again.new_versions, again.unchanged) == (0, 1)
    changed = repository_tasks_import(
        [record(pass_to_pass=PASS_TO_PASS[:2])], author="bob", change_note="drop test_mean"
    )
    assert changed.new_versions == 1
    second = TaskVersion.objects.get(number=2)
    assert second.parent == first and second.change_note == "drop test_mean"
    assert second.content_hash != first.content_hash
    # The tree did not change: both versions point at one stored workspace.
    assert second.workspace_id == first.workspace_id
    assert RepositoryWorkspace.objects.count() == 1


@pytest.mark.django_db
def test_tasks_sharing_a_tree_share_one_stored_workspace():
    other_bug = {**BUGGY, "calc/ops.py": BUGGY["calc/ops.py"].replace(b"a + b", b"a - b")}
    repository_tasks_import(
        [record("calc/clamp-1"), record("calc/clamp-2", problem_statement="clamp is wrong.")],
        author="alice",
    )
    assert RepositoryWorkspace.objects.count() == 1
    repository_tasks_import(
        [
            record(
                "calc/add-1",
                files=other_bug,
                reference_patch=make_patch(other_bug, FIXED),
                fail_to_pass=["tests/test_ops.py::test_add"],
                pass_to_pass=["tests/test_ops.py::test_mean"],
            )
        ],
        author="alice",
    )
    assert RepositoryWorkspace.objects.count() == 2
    size = sum(len(v) for v in BUGGY.values())  # "a - b" is as long as "a + b"
    assert list(RepositoryWorkspace.objects.values_list("file_count", "size_bytes")) == [
        (4, size),
        (4, size),
    ]


@pytest.mark.django_db
def test_the_content_hash_covers_workspace_and_hidden_files():
    repository_tasks_import([record()], author="alice")
    plain = TaskVersion.objects.get(number=1)
    repository_tasks_import([record(hidden_files=dict(HIDDEN))], author="alice")
    hidden = TaskVersion.objects.get(number=2)
    assert hidden.test_suite_id != plain.test_suite_id
    assert hidden.content_hash != plain.content_hash
    moved = {**BUGGY, "README.md": b"# calc\n"}
    repository_tasks_import([record(files=moved)], author="alice")
    third = TaskVersion.objects.get(number=3)
    assert third.workspace_id != plain.workspace_id
    assert third.test_suite_id == plain.test_suite_id
