"""Edits of a repository task make new versions (the workspace shared), refused edits name the
field, and the version diff shows the changed fields and trees."""

import pytest

from core.errors import InputError
from sandboxes.repository.patches import make_patch
from tasks_library.models import TaskVersion
from tasks_library.repositories import (
    record_check,
    repository_content,
    repository_tasks_import,
    version_record,
)
from tasks_library.selectors import task_versions_diff
from tasks_library.services import task_version_edit
from tests.tasks_library.repository_helpers import BUGGY, FIXED, HIDDEN, PASS_TO_PASS, record


@pytest.fixture
def version(db) -> TaskVersion:
    repository_tasks_import([record(hidden_files=dict(HIDDEN))], author="alice")
    return TaskVersion.objects.get()


def test_an_edit_makes_a_new_version_sharing_the_workspace(version):
    new = task_version_edit(
        version=version,
        author="bob",
        change_note="test_mean is slow; drop it",
        prompt="clamp ignores its upper bound.",
        pass_to_pass=PASS_TO_PASS[:2],
    )
    assert (new.number, new.parent_id, new.author) == (2, version.pk, "bob")
    assert new.workspace_id == version.workspace_id
    assert new.test_suite.hidden_files_id == version.test_suite.hidden_files_id
    assert new.test_suite.parent_id == version.test_suite_id
    content = repository_content(new)
    assert content.pass_to_pass == tuple(PASS_TO_PASS[:2])
    assert content.problem_statement == "clamp ignores its upper bound."
    assert content.files == dict(sorted(BUGGY.items())) and content.hidden_files == HIDDEN
    version.refresh_from_db()
    assert version.test_suite.pass_to_pass == PASS_TO_PASS  # the old version is untouched


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"reference_solution": "diff --git a/x.py b/x.py\n"}, "reference_solution", "patch"),
        ({"fail_to_pass": ["tests/test_none.py::t"]}, "fail_to_pass", "tests/test_none.py"),
        ({"test_command": "sh -c true"}, "test_command", "must start with 'pytest'"),
        ({"entry_point": "f"}, "entry_point", "not editable on a repository task"),
        ({"prompt": "  "}, "prompt", "empty"),
    ],
)
def test_a_refused_edit_names_the_field(version, changes, field, words):
    with pytest.raises(InputError) as caught:
        task_version_edit(version=version, author="bob", change_note="try", **changes)
    assert caught.value.field == field and words in str(caught.value)
    assert TaskVersion.objects.count() == 1


def test_an_edit_that_changes_nothing_is_refused(version):
    with pytest.raises(InputError, match="nothing changed"):
        task_version_edit(version=version, author="bob", change_note="same", prompt=version.prompt)


def test_the_diff_shows_text_fields_and_changed_files(version):
    better_fix = {**FIXED, "calc/ops.py": FIXED["calc/ops.py"] + b"\n\n# clamp fixed\n"}
    edited = task_version_edit(
        version=version,
        author="bob",
        change_note="a fuller fix",
        reference_solution=make_patch(BUGGY, better_fix),
        fail_to_pass=[*record().fail_to_pass, "tests/test_hidden.py::test_clamp_at_bound"],
    )
    changes = {c["field"]: c["diff"] for c in task_versions_diff(old=version, new=edited)}
    assert set(changes) == {"reference_patch", "test_suite.fail_to_pass"}
    assert "+tests/test_hidden.py::test_clamp_at_bound" in changes["test_suite.fail_to_pass"]
    assert "++# clamp fixed" in changes["reference_patch"]
    # A version whose tree differs: the workspace's diff is a patch of the changed file only.
    moved = version_record(edited)
    moved.files = {**moved.files, "README.md": b"# calc\nArithmetic.\n"}
    record_check(moved, where="test")
    repository_tasks_import([moved], author="carol")
    third = TaskVersion.objects.get(number=3)
    changes = {c["field"]: c["diff"] for c in task_versions_diff(old=edited, new=third)}
    assert set(changes) == {"workspace"}
    assert changes["workspace"].startswith("diff --git a/README.md b/README.md")
    assert "+Arithmetic." in changes["workspace"] and "calc/ops.py" not in changes["workspace"]
