"""Edits make new versions (parent, note, author), diffs, task set versions, runs pin the set
version."""

from io import StringIO

import pytest
from django.core.management import call_command

from core.errors import InputError
from tasks_library.models import TaskSetVersion, TaskVersion
from tasks_library.selectors import task_set_get, task_set_versions, task_versions_diff
from tasks_library.services import task_set_pin, task_version_edit
from training.config import RunConfig
from training.services import run_create


@pytest.fixture
def three(humaneval, write_jsonl):
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[:3])),
        "--taskset",
        "three",
        stdout=StringIO(),
    )
    return list(task_set_versions(task_set=task_set_get(name="three")))


@pytest.mark.django_db
def test_edit_creates_a_child_version_and_overwrites_nothing(three):
    old = three[0]
    before = {f: getattr(old, f) for f in ("prompt", "reference_solution", "content_hash")}
    new = task_version_edit(
        version=old,
        author="carol",
        change_note="assert the empty list too",
        hidden_tests=old.test_suite.hidden_tests + "    assert candidate([], 0.5) == False\n",
    )
    old.refresh_from_db()
    assert {f: getattr(old, f) for f in before} == before
    assert new.parent == old and new.number == old.number + 1 and new.task == old.task
    assert new.author == "carol" and new.change_note == "assert the empty list too"
    assert new.content_hash != old.content_hash and new.verdict == TaskVersion.VERDICT_PENDING
    assert new.test_suite.parent == old.test_suite
    assert len(new.test_suite.hidden_test_ids) == len(old.test_suite.hidden_test_ids) + 1
    assert new.environment == old.environment  # unchanged content, same version


@pytest.mark.django_db
def test_diff_shows_only_the_changed_fields(three):
    old = three[1]
    new = task_version_edit(
        version=old,
        author="carol",
        change_note="clearer name",
        reference_solution=old.reference_solution.replace("result", "groups"),
    )
    diff = task_versions_diff(old=old, new=new)
    assert [d["field"] for d in diff] == ["reference_solution"]
    text = diff[0]["diff"]
    assert text.startswith(
        f"--- v{old.number} reference_solution\n+++ v{new.number} reference_solution\n"
    )
    assert any(line.startswith("-") and "result" in line for line in text.splitlines()[2:])
    assert any(line.startswith("+") and "groups" in line for line in text.splitlines()[2:])
    assert task_versions_diff(old=old, new=old) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"change_note": ""}, "change_note: say what changed"),
        ({"change_note": "x", "colour": "red"}, "colour: not an editable field"),
        ({"change_note": "x"}, "nothing changed: this content is already"),
        (
            {"change_note": "x", "hidden_tests": "def check(candidate):\n    pass\n"},
            "hidden_tests: the tests contain no assertion",
        ),
        ({"change_note": "x", "hidden_tests": "def check(:\n"}, "test code does not parse"),
        ({"change_note": "x", "environment": {"runtime": "cobol"}}, "unknown environment 'cobol'"),
        ({"change_note": "x", "timeout_s": -1}, "timeout_s: must be a number of seconds"),
        ({"change_note": "x", "files": {"/etc/passwd": "x"}}, "must be a relative path"),
    ],
)
def test_bad_edit_is_refused_and_creates_nothing(three, changes, message):
    count = TaskVersion.objects.count()
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        task_version_edit(version=three[0], author="carol", **changes)
    assert TaskVersion.objects.count() == count


@pytest.mark.django_db
def test_pinning_records_task_set_versions_and_a_run_records_the_one_it_used(three):
    task_set = task_set_get(name="three")
    assert list(task_set.versions.values_list("number", flat=True)) == [1]
    task_set_pin(name="three", versions=three, author="dave")  # same pins: no new version
    assert task_set.versions.count() == 1
    TaskVersion.objects.filter(pk__in=[v.pk for v in three]).update(
        verdict=TaskVersion.VERDICT_VALID
    )
    run = run_create(task_set=task_set, config=RunConfig(steps=1))
    first = TaskSetVersion.objects.get(task_set=task_set, number=1)
    assert run.task_set_version == first
    assert first.task_versions == [[v.task.task_id, v.content_hash] for v in three]

    edited = task_version_edit(
        version=three[2],
        author="dave",
        change_note="tidy",
        reference_solution=three[2].reference_solution + "\n",
    )
    task_set_pin(
        name="three",
        versions=[*three[:2], edited],
        author="dave",
        change_note="take the tidy version",
    )
    second = task_set.versions.get(number=2)
    assert (
        second.task_versions[2] == [edited.task.task_id, edited.content_hash]
        and second.author == "dave"
    )
    run.refresh_from_db()
    assert run.task_set_version == first  # the run still says what it trained on
