"""Task ids sort as a reader counts: HumanEval/2 before HumanEval/10 before HumanEval/100, on the
task list page and in the API, whether a task was saved one by one or written in bulk."""

import re

import pytest
from django.test import Client

from tasks_library.models import Task, TaskVersion
from tests.tasks_library.conftest import client_for, many_versions

pytestmark = pytest.mark.django_db
IDS = ["HumanEval/100", "HumanEval/2", "HumanEval/10", "HumanEval/0", "HumanEval/1", "Bulk/007"]
NATURAL = ["Bulk/007", "HumanEval/0", "HumanEval/1", "HumanEval/2", "HumanEval/10", "HumanEval/100"]


@pytest.fixture
def tasks():
    many_versions(8, prefix="Bulk")  # Bulk/000..Bulk/007, written with bulk_create
    others = Task.objects.exclude(task_id="Bulk/007")
    TaskVersion.objects.filter(task__in=others).delete()
    others.delete()
    version = TaskVersion.objects.get()  # Bulk/007's
    for i, task_id in enumerate(IDS[:-1]):
        task = Task.objects.create(task_id=task_id, source="humaneval")
        TaskVersion.objects.create(
            task=task,
            number=1,
            content_hash=f"{i:064d}",
            prompt="p",
            entry_point="f",
            reference_solution="r",
            environment=version.environment,
            test_suite=version.test_suite,
        )


def test_the_natural_key_counts_numbers():
    from tasks_library.models import natural_key  # noqa: PLC0415 (the function under test)

    assert sorted(IDS, key=natural_key) == NATURAL
    assert natural_key("a/007") < natural_key("a/8") < natural_key("a/10") < natural_key("b/1")


def test_the_task_list_page_and_the_api_sort_task_ids_naturally(tasks, curator):
    client = Client()
    client.force_login(curator)
    page = client.get("/tasks/").content.decode()
    shown = re.findall(r'<tr data-task-id="([^"]+)"', page)
    assert shown == NATURAL, shown
    api = client_for(curator).get("/api/task-versions/").json()["results"]
    assert [row["task_id"] for row in api] == NATURAL
