"""The launch form (/runs/new/) and the Resume button: a valid form creates the run and launches it
through Celery (eager); a bad config key is named next to the field and creates nothing; viewers
are refused; the form is CSRF-protected; an interrupted run resumes through the same launch task."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils.html import escape

from tasks_library.models import EnvironmentVersion, Task, TaskSet, TaskVersion, TestSuiteVersion
from tasks_library.services import task_set_pin
from tests.tasks_library.conftest import PASSWORD, eager_celery, make_user, roles  # noqa: F401 (fixtures)
from training import backends, services
from training.config import RunConfig
from training.models import TrainingRun

pytestmark = pytest.mark.django_db


def one_task_set(name: str = "launchable") -> TaskSet:
    """A task set pinning one valid version (as validation leaves it), without sandboxes."""
    env, _ = EnvironmentVersion.objects.get_or_create(
        content_hash="e" * 64, defaults={"name": "python", "runtime": "python3.11"}
    )
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash="s" * 64,
        defaults={"visible_tests": "", "hidden_tests": "def check(c):\n    assert c()\n"},
    )
    task = Task.objects.create(task_id=f"Launch/{Task.objects.count()}", source="test")
    version = TaskVersion.objects.create(
        task=task,
        number=1,
        content_hash=task.task_id.lower().ljust(64, "0"),
        prompt="p",
        entry_point="f",
        reference_solution="r",
        environment=env,
        test_suite=suite,
        verdict=TaskVersion.VERDICT_VALID,
    )
    return task_set_pin(name=name, versions=[version], author="test")


@pytest.fixture
def launched(monkeypatch):
    """The local backend, as the Celery task calls it, claims the run (``pending`` -> ``launching``)
    and records the call instead of starting a trainer process."""
    calls = []

    def launch(run_id: int) -> None:
        calls.append(run_id)
        services.run_launch_claim(run_id=run_id, reason="test backend: claimed")

    fake = backends.Backend("local", launch, backends.local_status, lambda run: None)
    monkeypatch.setitem(backends.BACKENDS, "local", fake)
    return calls


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_valid_form_creates_the_run_and_launches_it_through_celery(roles, eager_celery, launched):
    task_set = one_task_set()
    client = logged_in(make_user("cora", "curators"))
    form = client.get("/runs/new/")
    assert (
        form.status_code == 200
        and b'id="launch-form"' in form.content
        and b"launchable" in form.content
    )
    response = client.post(
        "/runs/new/",
        {
            "task_set": task_set.pk,
            "steps": 7,
            "backend": "local",
            "config": 'lr=1e-4\n# a comment\n\ngroup_size=4\nreward_weights={"correctness": 1.0}',
        },
    )
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert (
        run.total_steps == 7
        and run.config["lr"] == 1e-4
        and run.config["group_size"] == 4
        and run.backend == "local"
    )
    assert launched == [run.pk]  # the Celery task ran (eager) and handed the run to its backend
    run.refresh_from_db()
    assert run.status == TrainingRun.LAUNCHING
    assert b"launch is queued" in client.get(response["Location"]).content

    # a JSON object works as well
    client.post(
        "/runs/new/",
        {
            "task_set": task_set.pk,
            "steps": 3,
            "backend": "local",
            "config": '{"group_size": 2, "max_turns": 1}',
        },
    )
    second = TrainingRun.objects.order_by("-id").first()
    assert (
        second.pk != run.pk and second.config["max_turns"] == 1 and launched == [run.pk, second.pk]
    )


@pytest.mark.parametrize(
    "config, named",
    [
        ("lr=1e-4\nlearning_rate=3", "learning_rate"),
        ('{"group_size": 1}', "group_size"),
        ("temperature=hot", "temperature"),
        ("steps=9", "steps"),
        ("lr 1e-4", "lr 1e-4"),
        ('{"lr": 1e-4,}', "not valid JSON"),
    ],
)
def test_invalid_config_names_the_key_and_creates_nothing(
    roles, eager_celery, launched, config, named
):
    task_set = one_task_set()
    client = logged_in(make_user("cora", "curators"))
    response = client.post(
        "/runs/new/", {"task_set": task_set.pk, "steps": 5, "backend": "local", "config": config}
    )
    assert response.status_code == 400
    html = response.content.decode()
    errors = html[html.index('id="errors-config"') :]
    errors = errors[: errors.index("</div>")]
    assert named in errors, errors
    assert escape(config.splitlines()[0]) in html  # what was typed is kept
    assert not TrainingRun.objects.exists() and launched == []


def test_kubernetes_without_an_image_and_an_empty_task_set_are_refused(
    roles, eager_celery, launched
):
    task_set = one_task_set()
    client = logged_in(make_user("cora", "curators"))
    response = client.post(
        "/runs/new/", {"task_set": task_set.pk, "steps": 5, "backend": "kubernetes", "config": ""}
    )
    assert response.status_code == 400 and b"kubernetes.image" in response.content
    empty = TaskSet.objects.create(name="empty-set")
    response = client.post(
        "/runs/new/", {"task_set": empty.pk, "steps": 5, "backend": "local", "config": ""}
    )
    assert (
        response.status_code == 400
        and b'id="errors-task_set"' in response.content
        and b"is empty" in response.content
    )
    assert not TrainingRun.objects.exists() and launched == []


def test_viewers_are_refused_and_anonymous_users_sent_to_sign_in(roles, launched):
    task_set = one_task_set()
    viewer = logged_in(make_user("vic", "viewers"))
    assert viewer.get("/runs/new/").status_code == 403
    post = {"task_set": task_set.pk, "steps": 5, "backend": "local", "config": ""}
    assert viewer.post("/runs/new/", post).status_code == 403
    anonymous = Client().post("/runs/new/", post)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert not TrainingRun.objects.exists() and launched == []


def test_operators_with_the_permission_and_superusers_may_launch(roles, eager_celery, launched):
    task_set = one_task_set()
    operator = make_user("otto", None)
    operator.user_permissions.add(Permission.objects.get(codename="add_trainingrun"))
    admin = User.objects.create_superuser("root", password=PASSWORD)
    for user in (operator, admin):
        response = logged_in(user).post(
            "/runs/new/", {"task_set": task_set.pk, "steps": 2, "backend": "local"}
        )
        assert response.status_code == 302, response.content[:500]
    assert TrainingRun.objects.count() == 2


def test_the_form_is_csrf_protected(roles, launched):
    task_set = one_task_set()
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("cora", "curators"))
    post = {"task_set": task_set.pk, "steps": 5, "backend": "local", "config": ""}
    assert client.post("/runs/new/", post).status_code == 403
    page = client.get("/runs/new/")
    token = page.context["csrf_token"]
    assert client.post("/runs/new/", {**post, "csrfmiddlewaretoken": str(token)}).status_code == 302
    assert TrainingRun.objects.count() == 1


def test_an_interrupted_run_resumes_from_its_page(roles, eager_celery, launched):
    run = services.run_create(task_set=one_task_set(), config=RunConfig(steps=4))
    for status in ("launching", "running", "interrupted"):
        services.run_transition(run_id=run.pk, to_status=status, reason="test")
    curator = logged_in(make_user("cora", "curators"))
    viewer = logged_in(make_user("vic", "viewers"))
    assert b'id="resume-button"' in curator.get(f"/runs/{run.pk}/").content
    assert b'id="resume-button"' not in viewer.get(f"/runs/{run.pk}/").content
    assert viewer.post(f"/runs/{run.pk}/resume/").status_code == 403
    assert Client().post(f"/runs/{run.pk}/resume/").status_code == 302  # to sign in
    run.refresh_from_db()
    assert run.status == TrainingRun.INTERRUPTED and launched == []

    response = curator.post(f"/runs/{run.pk}/resume/", follow=True)
    assert response.status_code == 200 and b"resuming run" in response.content
    run.refresh_from_db()
    assert (
        run.status == TrainingRun.LAUNCHING
        and run.summary["resumes"] == 1
        and "cora" in run.status_reason
    )
    assert launched == [run.pk]
    # resumed: the button is hidden until the run is interrupted again (the page follows it live)
    assert re.search(
        r'<form [^>]*id="resume-form"[^>]* hidden>',
        curator.get(f"/runs/{run.pk}/").content.decode(),
    )
    # not interrupted any more: nothing to resume, said on the page, nothing launched
    again = curator.post(f"/runs/{run.pk}/resume/", follow=True)
    assert b"nothing to resume" in again.content and launched == [run.pk]
    assert curator.get(f"/runs/{run.pk}/resume/").status_code == 405
