"""The launch form's key settings: each is a field with its key's range and default, a blank one
keeps the default, a set one goes into the run's config beside the raw config's keys; a raw key
that has a field of its own and disagrees with it is refused naming the key, and an error of a
field's value lands on that field."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.console.test_run_launch_form import launched, one_task_set  # noqa: F401 (fixture)
from tests.tasks_library.conftest import eager_celery, make_user, roles  # noqa: F401 (fixtures)
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


def curator() -> Client:
    client = Client()
    client.force_login(make_user("cora", "curators"))
    return client


def test_fields_carry_ranges_and_fill_the_config(roles, eager_celery, launched):
    task_set = one_task_set()
    client = curator()
    page = client.get("/runs/new/").content.decode()
    assert 'name="group_size"' in page and 'min="2"' in page and 'max="1024"' in page
    assert 'placeholder="8"' in page and "default 8" in page  # the key's default, shown
    assert 'name="rollout_mode"' in page and 'data-agent-only="1"' in page
    response = client.post(
        "/runs/new/",
        {
            "task_set": task_set.pk,
            "steps": 3,
            "backend": "local",
            "rollout_mode": "agent",
            "group_size": "4",
            "lr": "0.0005",
            "max_turns": "",  # blank: the default
            "config": "hack_policy=zero\ngroup_size=4",  # agrees with its field
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    config = TrainingRun.objects.get().config
    assert config["rollout_mode"] == "agent" and config["group_size"] == 4
    assert config["lr"] == 0.0005 and config["hack_policy"] == "zero" and config["max_turns"] == 2


def test_disagreements_and_bad_values_are_named_where_they_were_typed(
    roles, eager_celery, launched
):
    task_set = one_task_set()
    client = curator()
    base = {"task_set": task_set.pk, "steps": 3, "backend": "local"}
    clash = client.post("/runs/new/", {**base, "group_size": "4", "config": "group_size=6"})
    assert clash.status_code == 400
    html = clash.content.decode()
    assert 'id="errors-config"' in html and "has a field of its own" in html
    low = client.post("/runs/new/", {**base, "group_size": "1"})
    assert low.status_code == 400 and 'id="errors-group_size"' in low.content.decode()
    overlong = client.post(
        "/runs/new/",
        {**base, "max_turns": "1", "max_new_tokens": "8", "config": "overlong_cache_tokens=9"},
    )
    assert 'id="errors-config"' in overlong.content.decode()  # named by the raw key it came from
    assert not TrainingRun.objects.exists() and launched == []
