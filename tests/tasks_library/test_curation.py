"""Quarantine and approval by a curator: written reasons, recorded author, training skips
quarantined versions."""

from io import StringIO

import pytest
from django.core.management import call_command

from core.errors import InputError
from tasks_library.models import TaskVersion
from tasks_library.selectors import task_set_get, task_set_versions, trainable
from tasks_library.services import task_versions_approve, task_versions_quarantine
from training.config import RunConfig
from training.services import run_create


@pytest.fixture
def four(humaneval, write_jsonl):
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[:4])),
        "--taskset",
        "four",
        stdout=StringIO(),
    )
    versions = list(task_set_versions(task_set=task_set_get(name="four")))
    TaskVersion.objects.filter(pk__in=[v.pk for v in versions]).update(
        verdict=TaskVersion.VERDICT_VALID
    )
    return versions


@pytest.mark.django_db
def test_quarantined_versions_are_never_trained_on(four):
    changed = task_versions_quarantine(
        version_ids=[four[0].pk, four[1].pk], author="erin", reason="tests too lenient"
    )
    assert changed == 2
    run = run_create(task_set=task_set_get(name="four"), config=RunConfig(steps=1))
    assert sorted(run.task_versions.values_list("pk", flat=True)) == sorted(v.pk for v in four[2:])
    held = TaskVersion.objects.get(pk=four[0].pk)
    assert (
        held.quarantined
        and held.quarantine_reason == "tests too lenient"
        and held.curated_by == "erin"
    )


@pytest.mark.django_db
def test_approval_needs_a_reason_and_lifts_the_quarantine(four):
    task_versions_quarantine(version_ids=[four[0].pk], author="erin", reason="suspicious")
    with pytest.raises(InputError, match="reason: write why"):
        task_versions_approve(version_ids=[four[0].pk], author="frank", reason="  ")
    assert TaskVersion.objects.get(pk=four[0].pk).quarantined
    task_versions_approve(
        version_ids=[four[0].pk], author="frank", reason="read the tests; they are fine"
    )
    version = TaskVersion.objects.get(pk=four[0].pk)
    assert not version.quarantined and version.override_reason == "read the tests; they are fine"
    assert version.curated_by == "frank"
    assert trainable(TaskVersion.objects.filter(pk=version.pk)).exists()


@pytest.mark.django_db
def test_unvalidated_versions_cannot_be_approved(four):
    TaskVersion.objects.filter(pk=four[3].pk).update(verdict=TaskVersion.VERDICT_PENDING)
    with pytest.raises(InputError, match="validate first"):
        task_versions_approve(version_ids=[four[3].pk], author="frank", reason="looks fine")
    assert not trainable(TaskVersion.objects.filter(pk=four[3].pk)).exists()
