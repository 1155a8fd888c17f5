"""Fixtures of the curation tests: roles as the migration makes them, users, a small library."""

import importlib
import json
from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from rest_framework.test import APIClient

from console.celery import app
from core.queues import VALIDATION
from sandboxes import queue as Q
from tasks_library.models import (
    EnvironmentVersion,
    Task,
    TaskVersion,
    TestSuiteVersion,
    ValidationJob,
)
from tasks_library.selectors import task_set_get, task_set_versions

PASSWORD = "correct horse battery"
groups_migration = importlib.import_module("tasks_library.migrations.0003_curator_viewer_groups")


@pytest.fixture
def roles(db):
    """The curators and viewers groups, as the migration makes them (a transactional test's flush
    drops them)."""
    groups_migration.create_groups(django_apps, None)


def make_user(name: str, group: str | None) -> User:
    user = User.objects.create_user(username=name, password=PASSWORD)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def curator(roles) -> User:
    return make_user("cora", "curators")


@pytest.fixture
def viewer(roles) -> User:
    return make_user("vic", "viewers")


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def library(humaneval, write_jsonl) -> list[TaskVersion]:
    """HumanEval/0..2 as task set ``lib``: v0 valid and easy, v1 broken and quarantined, v2
    pending."""
    call_command(
        "import_tasks",
        "humaneval",
        "--path",
        str(write_jsonl(humaneval[:3])),
        "--taskset",
        "lib",
        stdout=StringIO(),
    )
    versions = list(task_set_versions(task_set=task_set_get(name="lib")))
    TaskVersion.objects.filter(pk=versions[0].pk).update(
        verdict="valid", mutation_score=0.9, attempts_passed=9, attempts_total=10
    )
    TaskVersion.objects.filter(pk=versions[1].pk).update(
        verdict="broken_reference",
        quarantined=True,
        quarantine_reason="automatic: broken_reference",
        verdict_reasons=["reference status failed"],
        report={
            "reference": {
                "runs": 1,
                "passed_runs": 0,
                "statuses": ["failed"],
                "wall_ms_median": 12,
                "failing": [{"test": "assert_1", "error": "AssertionError"}],
            },
            "trivial": {"status": "failed", "tests_passed": 0, "tests_total": 7},
            "examples": {
                "count": 2,
                "status": "failed",
                "contradicting": [
                    {"example": "separate('(a)') == ['(b)']", "line": 9, "error": "got ['(a)']"}
                ],
            },
            "mutation": {
                "mutants": 4,
                "killed": 3,
                "score": 0.75,
                "threshold": 0.6,
                "survivors": [
                    {"id": "m3", "operator": "comparison", "description": "line 4: '<' became '<='"}
                ],
            },
        },
    )
    Task.objects.filter(task_id="HumanEval/0").update(tags=["lists", "easy-one"])
    return [TaskVersion.objects.get(pk=v.pk) for v in versions]


@pytest.fixture
def eager_celery():
    """Run Celery tasks in-process (Celery's own test mode) so a validation really runs here."""
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def no_queued_validation():
    """The validations a test queues for real (the validate button through daphne) leave no
    message behind in the ``validation`` queue, where a later test's validation worker would take
    it: dropped at the end, by their Celery ids."""
    yield
    ids = set(ValidationJob.objects.exclude(celery_id="").values_list("celery_id", flat=True))
    redis = Q.connection()
    for raw in redis.lrange(VALIDATION, 0, -1):
        if json.loads(raw)["headers"]["id"] in ids:
            redis.lrem(VALIDATION, 1, raw)


def many_versions(tasks: int, versions_each: int = 1, prefix: str = "Bulk") -> None:
    """``tasks`` tasks ``<prefix>/000``... with ``versions_each`` versions each, written in bulk."""
    env, _ = EnvironmentVersion.objects.get_or_create(
        content_hash="e" * 64, defaults={"name": "python", "runtime": "python3.11"}
    )
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash="s" * 64,
        defaults={"visible_tests": "", "hidden_tests": "def check(c):\n    assert c()\n"},
    )
    made = Task.objects.bulk_create(
        Task(task_id=f"{prefix}/{i:03d}", source=prefix.lower(), tags=["t"]) for i in range(tasks)
    )
    TaskVersion.objects.bulk_create(
        TaskVersion(
            task=task,
            number=n,
            content_hash=f"{prefix}{i:03d}{n:02d}".lower().ljust(64, "0"),
            prompt="p",
            entry_point="f",
            reference_solution="r",
            environment=env,
            test_suite=suite,
            verdict="valid",
            attempts_total=n,
        )
        for i, task in enumerate(made)
        for n in range(1, versions_each + 1)
    )
