"""The console's read rule (core/access.py) on every read page and JSON API of the URLconf.

Private (``CRUCIBLE_CONSOLE_PUBLIC`` off): an anonymous visitor is sent to the login page (pages) or
refused 401 with a challenge (JSON); a signed-in user without a role gets 403; a viewer reads.
Public: anonymous visitors read. The review pages need a signed-in user in either mode, and a
role while private.

The task library needs a signed-in user in either mode, and a role while private.

The URL list comes from the URLconf: every named route must be in READ, SIGNED_IN_READ,
LIBRARY_READ or EXEMPT (with the reason), so a new page fails here until someone decides who may
read it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver

from console.review import models as m
from console.review.services import review_queue_create, task_draft_create
from tasks_library.models import TaskVersion, ValidationJob
from tasks_library.repositories import repository_tasks_import
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from tests.tasks_library.repository_helpers import record
from training.models import StepMetric

pytestmark = pytest.mark.django_db

# url name -> (path from the world, "page" or "json")
READ = {
    "run-list": (lambda w: "/", "page"),
    "run-detail": (lambda w: f"/runs/{w.run.pk}/", "page"),
    "run-compare": (lambda w: f"/runs/compare/?runs={w.run.pk}", "page"),
    "run-trajectory-list": (lambda w: f"/runs/{w.run.pk}/trajectories/", "page"),
    "trajectory-list": (lambda w: "/trajectories/", "page"),
    "trajectory-detail": (lambda w: f"/runs/{w.run.pk}/trajectories/{w.trajectory.pk}/", "page"),
    "sandbox-pool": (lambda w: "/sandboxes/", "page"),
    "api-run-steps": (lambda w: f"/api/runs/{w.run.pk}/steps/", "json"),
    "api-runs": (lambda w: "/api/runs/", "json"),
    "api-run": (lambda w: f"/api/runs/{w.run.pk}/", "json"),
    "api-run-components": (lambda w: f"/api/runs/{w.run.pk}/components/?first=1&last=1", "json"),
    "api-run-metrics": (lambda w: f"/api/runs/{w.run.pk}/metrics/?name=reward/mean", "json"),
    "api-sandbox-pool": (lambda w: "/api/sandboxes/pool/", "json"),
    "api-trajectories": (lambda w: "/api/trajectories/", "json"),
    "api-run-trajectories": (lambda w: f"/api/runs/{w.run.pk}/trajectories/", "json"),
    "api-trajectory": (lambda w: f"/api/runs/{w.run.pk}/trajectories/{w.trajectory.pk}/", "json"),
    "api-trajectory-turns": (
        lambda w: f"/api/runs/{w.run.pk}/trajectories/{w.trajectory.pk}/turns/",
        "json",
    ),
}
# signed in always (console/review/views.py); a role too while private
SIGNED_IN_READ = {
    "review-home": lambda w: "/review/",
    "review-queue": lambda w: f"/review/queues/{w.queue.pk}/",
    "review-item": lambda w: f"/review/items/{w.item.pk}/",
    "review-draft": lambda w: f"/review/drafts/{w.draft.pk}/",
    "review-task-labels": lambda w: f"/review/tasks/{w.versions[0].pk}/",
    "run-review": lambda w: f"/runs/{w.run.pk}/review/",
}
# The task library (hidden tests, references): signed in always, a role too while private;
# url name -> (path from the world, "page" or "json")
LIBRARY_READ = {
    "task-list": (lambda w: "/tasks/", "page"),
    "task-detail": (lambda w: f"/tasks/{w.versions[0].task.task_id}/", "page"),
    "taskset-list": (lambda w: "/tasksets/", "page"),
    "taskset-detail": (lambda w: f"/tasksets/{w.taskset}/", "page"),
    "api-task-versions": (lambda w: "/api/task-versions/", "json"),
    "api-task-version": (
        lambda w: f"/api/tasks/{w.versions[0].task.task_id}/versions/{w.versions[0].number}/",
        "json",
    ),
    "api-task-versions-of": (
        lambda w: f"/api/tasks/{w.versions[0].task.task_id}/versions/",
        "json",
    ),
    "api-task-diff": (
        lambda w: (
            f"/api/tasks/{w.versions[0].task.task_id}/diff/?old={w.versions[0].number}"
            f"&new={w.versions[0].number}"
        ),
        "json",
    ),
    "api-task": (lambda w: f"/api/tasks/{w.versions[0].task.task_id}/", "json"),
    "api-task-version-files": (
        lambda w: f"/api/tasks/{w.repository.task.task_id}/versions/1/files/?path=calc",
        "json",
    ),
    "api-task-sets": (lambda w: "/api/task-sets/", "json"),
    "api-task-set": (lambda w: f"/api/task-sets/{w.taskset}/", "json"),
    "api-validation-job": (lambda w: f"/api/validation-jobs/{w.job.pk}/", "json"),
    "environment-list": (lambda w: "/environments/", "page"),
    "environment-detail": (lambda w: f"/environments/{w.versions[0].environment_id}/", "page"),
    "api-environments": (lambda w: "/api/environments/", "json"),
    "api-environment": (lambda w: f"/api/environments/{w.versions[0].environment_id}/", "json"),
    # the review API reads as the review pages do: a sign-in always, a role while private
    "api-review-queues": (lambda w: "/api/review/queues/", "json"),
    "api-review-queue": (lambda w: f"/api/review/queues/{w.queue.pk}/", "json"),
}
WRITE = (
    "a write with its own role check (tests/console/test_roles_matrix.py, test_run_launch_form.py)"
)
LIBRARY = "a task library write: curators only (core.permissions, tests/tasks_library)"
EXEMPT = {
    "healthz": "the readiness probe of launchers and Kubernetes; says nothing about runs",
    "livez": "Kubernetes' liveness probe: the process answers; says nothing about runs",
    "metrics": (
        "Prometheus scrapes: its own bearer token, CRUCIBLE_METRICS_TOKEN "
        "(console/metrics_views.py)"
    ),
    "login": "signing in",
    "favicon": "the console's icon",
    "favicon-ico": "the console's icon, where browsers look by default",
    "logout": "signing out",
    "api-keys": "the signed-in user's own API keys (tests/security/test_api_keys.py)",
    "api-key-revoke": "revokes one of the signed-in user's keys (tests/security/test_api_keys.py)",
    "admin:*": "Django's admin: staff only",
    "api-schema": "the API's documentation (drf-spectacular): its shape, no data",
    "api-docs": "the API's documentation (Swagger UI)",
    "api-redoc": "the API's documentation (Redoc)",
    **dict.fromkeys(
        [
            "run-launch",
            "run-resume",
            "run-cancel",
            "run-edit",
            "api-run-cancel",
            "api-run-resume",
            "alert-acknowledge",
            "review-queue-new",
            "review-item-label",
            "review-item-assign",
            "review-item-confirm",
            "api-review-item-label",
            "api-review-item-confirm",
            "review-item-draft",
            "review-draft-submit",
        ],
        WRITE,
    ),
    **dict.fromkeys(
        [
            "task-edit",
            "task-validate",
            "task-curate",
            "api-quarantine",
            "api-approve",
            "api-validate",
            "api-task-set-pin",
            "api-environment-versions",
            "api-environment-build",
        ],
        LIBRARY,
    ),
}


def url_names(patterns=None, namespace: tuple[str, ...] = ()):
    """Every route's name (``namespace:name``; a whole namespace as ``namespace:*``)."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                yield "admin:*"
            else:
                yield from url_names(
                    pattern.url_patterns,
                    namespace + ((pattern.namespace,) if pattern.namespace else ()),
                )
        else:
            yield ":".join(namespace + (pattern.name or f"<unnamed {pattern.pattern}>",))


def test_every_route_is_checked_or_exempt_with_a_reason():
    names = set(url_names())
    classified = READ.keys() | SIGNED_IN_READ.keys() | LIBRARY_READ.keys() | EXEMPT.keys()
    lists = [READ.keys(), SIGNED_IN_READ.keys(), LIBRARY_READ.keys(), EXEMPT.keys()]
    assert sum(map(len, lists)) == len(classified), "a route is in two lists"
    unlisted = sorted(names - classified)
    assert not unlisted, (
        f"routes {unlisted} are in no list of tests/console/test_console_access.py: add each to "
        "READ (decorate the view with core.access.console_read_page/_json or give it "
        "ConsoleRead) or to EXEMPT with the reason"
    )
    assert not classified - names, f"listed but no longer routed: {sorted(classified - names)}"


@pytest.fixture
def world(humaneval):
    make_roles()
    viewer, nobody, curator = (
        make_user("vic", "viewer"),
        make_user("nobody", None),
        make_user("cora", "curator"),
    )
    run, versions = seed_run(humaneval, tasks=2)
    StepMetric.objects.create(
        run=run, step=1, reward_mean=0.5, reward_histogram=[0] * 10, metrics={}
    )
    trajectories = seed_trajectories(run, versions, [{"reward": 1.0}, {"reward": 0.0}])
    queue = review_queue_create(
        name="access",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[curator],
        created_by=curator,
    )
    draft = task_draft_create(
        trajectory_id=trajectories[0].pk,
        created_by=curator,
        task_id="review/access",
        prompt="def one():\n    pass\n",
        entry_point="one",
        reference_solution="    return 1\n",
        tests="def check(candidate):\n    assert candidate() == 1\n",
    )
    job = ValidationJob.objects.create(version_ids=[versions[0].pk], created_by="cora")
    repository_tasks_import([record("access/repository")], author="cora")
    return SimpleNamespace(
        job=job,
        repository=TaskVersion.objects.get(task__task_id="access/repository"),
        viewer=viewer,
        nobody=nobody,
        run=run,
        versions=versions,
        trajectory=trajectories[0],
        queue=queue,
        item=queue.items.get(),
        draft=draft,
        taskset=run.task_set.name,
    )


def get(path: str, user=None):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get(path)


def assert_sent_to_login(response, path: str) -> None:
    assert response.status_code == 302, (path, response.status_code)
    assert response["Location"].startswith("/accounts/login/?next="), (path, response["Location"])


@pytest.mark.parametrize("name", sorted(READ))
def test_private_console_refuses_anonymous_and_roleless_readers_and_admits_viewers(
    world, settings, name
):
    path_of, kind = READ[name]
    path = path_of(world)
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    anonymous = get(path)
    if kind == "page":
        assert_sent_to_login(anonymous, path)
    else:
        # Not signed in: 401 with the challenge a script answers (a bearer API key).
        assert anonymous.status_code == 401 and anonymous["Content-Type"].startswith(
            "application/json"
        ), (path, anonymous.status_code, anonymous.content[:200])
        assert anonymous["WWW-Authenticate"] == 'Bearer realm="crucible"', path
    roleless = get(path, world.nobody)
    assert roleless.status_code == 403, (path, roleless.status_code)
    assert b"viewers" in roleless.content, "the refusal says which role to ask for"
    viewer = get(path, world.viewer)
    assert viewer.status_code == 200, (path, viewer.status_code, viewer.content[:300])


@pytest.mark.parametrize("name", sorted(READ))
def test_public_console_lets_anonymous_visitors_read(world, settings, name):
    path_of, _kind = READ[name]
    settings.CRUCIBLE_CONSOLE_PUBLIC = True
    response = get(path_of(world))
    assert response.status_code == 200, (
        path_of(world),
        response.status_code,
        response.content[:300],
    )


@pytest.mark.parametrize("name", sorted(SIGNED_IN_READ))
def test_review_pages_need_a_sign_in_always_and_a_role_while_private(world, settings, name):
    path = SIGNED_IN_READ[name](world)
    for public in (True, False):
        settings.CRUCIBLE_CONSOLE_PUBLIC = public
        assert_sent_to_login(get(path), path)
        assert get(path, world.viewer).status_code == 200, (path, public)
        assert get(path, world.nobody).status_code == (200 if public else 403), (path, public)


@pytest.mark.parametrize("name", sorted(LIBRARY_READ))
def test_task_library_needs_a_sign_in_always_and_a_role_while_private(world, settings, name):
    """Hidden tests and references: never to an anonymous visitor; while private, not to a
    signed-in user without a role either."""
    path_of, kind = LIBRARY_READ[name]
    path = path_of(world)
    for public in (True, False):
        settings.CRUCIBLE_CONSOLE_PUBLIC = public
        anonymous = get(path)
        if kind == "page":
            assert_sent_to_login(anonymous, path)
        else:
            assert anonymous.status_code == 401, (path, public, anonymous.status_code)
        assert get(path, world.viewer).status_code == 200, (path, public)
        roleless = get(path, world.nobody)
        assert roleless.status_code == (200 if public else 403), (
            path,
            public,
            roleless.status_code,
        )
        if not public:
            assert b"viewers" in roleless.content, "the refusal says which role to ask for"


def test_object_permission_on_one_run_admits_that_run_only(world, settings):
    """A user with no role who holds ``training.view_trainingrun`` for one run (an object-permission
    backend's answer) reads that run's pages, and nothing else."""
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "tests.console.test_console_access.OneRunBackend",
    ]
    OneRunBackend.run_id = world.run.pk
    assert get(f"/runs/{world.run.pk}/", world.nobody).status_code == 200
    assert get(f"/api/runs/{world.run.pk}/steps/", world.nobody).status_code == 200
    assert get(f"/runs/compare/?runs={world.run.pk}", world.nobody).status_code == 200
    assert get("/", world.nobody).status_code == 403  # the run list is not that run


class OneRunBackend:
    """An object-permission backend (as django-guardian is) granting one run to anyone signed in."""

    run_id: int | None = None

    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user, perm, obj=None) -> bool:
        return perm == "training.view_trainingrun" and obj is not None and obj.pk == self.run_id
