"""Every role against every write: the review pages' and the existing ones (run cancel, alert
acknowledgement, the task library's pages and API). Allowed: a 2xx/3xx answer and the write done;
refused: 403 (or, signed out, the login page for pages and 401/403 for the API) and nothing written.

Roles: admin (a superuser), curator, operator, reviewer, viewer, and an anonymous visitor. The
review item under test is assigned to everyone who may review (admin, curator, reviewer): operators
and viewers cannot be assigned, so they cannot label.
"""

from types import SimpleNamespace

import pytest
from django.test import Client

from console.review import models as m
from console.review.services import review_assign, review_queue_create, task_draft_create
from tasks_library.forms import EditForm
from tasks_library.models import TaskSet, TaskVersion
from tasks_library.tasks import validate_task_versions
from tests.review.review_seed import make_roles, make_user, seed_run, seed_trajectories
from training.models import Alert, TrainingRun
from training.tasks import run_cancel_task, run_launch

pytestmark = pytest.mark.django_db

ROLES = ("admin", "curator", "operator", "reviewer", "viewer", "anonymous")
USERNAMES = {
    "admin": "ada",
    "curator": "cora",
    "operator": "otto",
    "reviewer": "rita",
    "viewer": "vic",
}
CURATORS = {"admin", "curator"}
MANAGERS = {
    "admin",
    "curator",
    "operator",
}  # create review queues, assign items, cancel runs, acknowledge alerts
REVIEWING = {"admin", "curator", "reviewer"}  # label their assigned items, write task drafts


@pytest.fixture
def world(humaneval, monkeypatch):
    make_roles()
    users = {role: make_user(name, role) for role, name in USERNAMES.items()}
    olga = make_user("olga", "reviewer")
    run, versions = seed_run(humaneval, tasks=2)
    TaskVersion.objects.filter(pk=versions[1].pk).update(
        quarantined=True, quarantine_reason="automatic"
    )
    trajectories = seed_trajectories(run, versions, [{"reward": 1.0}, {"reward": 0.0}])
    queue = review_queue_create(
        name="matrix",
        run_id=run.pk,
        strategy=m.UNIFORM,
        size=1,
        reviewers_per_item=1,
        reviewers=[users["reviewer"]],
        created_by=users["curator"],
    )
    item = queue.items.get()
    for role in REVIEWING - {"reviewer"}:
        review_assign(item_id=item.pk, reviewer=users[role], assigned_by=users["curator"])
    draft = task_draft_create(
        trajectory_id=item.trajectory_id,
        created_by=users["curator"],
        task_id="review/matrix",
        prompt="def one():\n    pass\n",
        entry_point="one",
        reference_solution="    return 1\n",
        tests="def check(candidate):\n    assert candidate() == 1\n",
    )
    alert = Alert.objects.create(
        run=run,
        step=1,
        last_step=1,
        stream="reward/mean",
        detector="adwin",
        statistic=0.9,
        threshold=0.5,
        message="reward moved",
    )
    interrupted = TrainingRun.objects.create(
        task_set=run.task_set, total_steps=5, status=TrainingRun.INTERRUPTED, config={}
    )
    calls = []
    monkeypatch.setattr(run_cancel_task, "delay", lambda *a, **k: calls.append(("cancel", a)))
    monkeypatch.setattr(run_launch, "delay", lambda *a, **k: calls.append(("launch", a)))
    monkeypatch.setattr(
        validate_task_versions,
        "delay",
        lambda *a, **k: calls.append(("validate", a)) or SimpleNamespace(id="job-1"),
    )
    return SimpleNamespace(
        users=users,
        olga=olga,
        run=run,
        interrupted=interrupted,
        versions=versions,
        trajectories=trajectories,
        queue=queue,
        item=item,
        draft=draft,
        alert=alert,
        calls=calls,
    )


def edit_form(version, role) -> dict:
    data = {k: ("" if v is None else v) for k, v in EditForm.initial_for(version).items()}
    data.update(prompt=version.prompt + f"# edited by {role}\n", change_note=f"edit by {role}")
    return data


# name -> (method, path(world), data(world, role) or None, "json" or "form", allowed roles,
# done(world, role) -> bool)
ENDPOINTS = {
    # --- the review pages -----------------------------------------------------------------------
    "review queue create": (
        lambda w: "/review/queues/new/",
        lambda w, role: {
            "name": f"by {role}",
            "run": w.run.pk,
            "strategy": m.UNIFORM,
            "size": 2,
            "reviewers_per_item": 1,
            "reviewers": [w.users["reviewer"].pk],
            "seed": 1,
        },
        "form",
        MANAGERS,
        lambda w, role: m.ReviewQueue.objects.filter(name=f"by {role}").exists(),
    ),
    "review item assign": (
        lambda w: f"/review/items/{w.item.pk}/assign/",
        lambda w, role: {"reviewer": "olga"},
        "form",
        MANAGERS,
        lambda w, role: m.ReviewAssignment.objects.filter(item=w.item, reviewer=w.olga).exists(),
    ),
    "review item label": (
        lambda w: f"/review/items/{w.item.pk}/label/",
        lambda w, role: {"label": m.CORRECT, "note": ""},
        "form",
        REVIEWING,
        lambda w, role: m.ReviewLabel.objects.filter(item=w.item).exists(),
    ),
    "review item confirm (curators decide an item)": (
        lambda w: f"/review/items/{w.item.pk}/confirm/",
        lambda w, role: {"label": m.CORRECT, "note": f"checked by {role}"},
        "form",
        CURATORS,
        lambda w, role: m.ReviewItem.objects.get(pk=w.item.pk).decision == m.CORRECT,
    ),
    "review item draft": (
        lambda w: f"/review/items/{w.item.pk}/draft/",
        lambda w, role: {
            "task_id": f"review/by-{role}",
            "prompt": "def two():\n    pass\n",
            "entry_point": "two",
            "reference_solution": "    return 2\n",
            "tests": "def check(candidate):\n    assert candidate() == 2\n",
        },
        "form",
        REVIEWING,
        lambda w, role: m.TaskDraft.objects.filter(task_id=f"review/by-{role}").exists(),
    ),
    "review draft submit": (
        lambda w: f"/review/drafts/{w.draft.pk}/submit/",
        lambda w, role: {},
        "form",
        CURATORS,
        lambda w, role: m.TaskDraft.objects.get(pk=w.draft.pk).status == m.TaskDraft.SUBMITTED,
    ),
    # --- runs -------------------------------------------------------------------------------------
    "run cancel": (
        lambda w: f"/runs/{w.run.pk}/cancel/",
        lambda w, role: {},
        "form",
        MANAGERS,
        lambda w, role: any(c[0] == "cancel" for c in w.calls),
    ),
    "run rename and tag (page)": (
        lambda w: f"/runs/{w.run.pk}/edit/",
        lambda w, role: {"name": f"page by {role}", "description": "", "tags": "matrix"},
        "form",
        MANAGERS,
        lambda w, role: TrainingRun.objects.filter(name=f"page by {role}").exists(),
    ),
    "alert acknowledge": (
        lambda w: f"/runs/{w.run.pk}/alerts/{w.alert.pk}/ack/",
        lambda w, role: {"note": f"seen by {role}"},
        "form",
        MANAGERS,
        lambda w, role: Alert.objects.get(pk=w.alert.pk).acknowledged_at is not None,
    ),
    # --- the review API: the same rules as the review pages ---------------------------------------
    "review queue create (API)": (
        lambda w: "/api/review/queues/",
        lambda w, role: {
            "name": f"api by {role}",
            "run": w.run.pk,
            "strategy": m.UNIFORM,
            "size": 2,
            "reviewers": ["rita"],
        },
        "json",
        MANAGERS,
        lambda w, role: m.ReviewQueue.objects.filter(name=f"api by {role}").exists(),
    ),
    "review item label (API)": (
        lambda w: f"/api/review/items/{w.item.pk}/label/",
        lambda w, role: {"label": m.CORRECT},
        "json",
        REVIEWING,
        lambda w, role: m.ReviewLabel.objects.filter(item=w.item).exists(),
    ),
    "review item confirm (API)": (
        lambda w: f"/api/review/items/{w.item.pk}/confirm/",
        lambda w, role: {"label": m.CORRECT, "note": role},
        "json",
        CURATORS,
        lambda w, role: m.ReviewItem.objects.get(pk=w.item.pk).decision == m.CORRECT,
    ),
    # --- the runs API: the same rules as the run pages -------------------------------------------
    "run launch (API)": (
        lambda w: "/api/runs/",
        lambda w, role: {"task_set": w.run.task_set.name, "steps": 3, "name": f"api by {role}"},
        "json",
        MANAGERS,
        lambda w, role: (
            TrainingRun.objects.filter(name=f"api by {role}").exists()
            and ("launch", (TrainingRun.objects.get(name=f"api by {role}").pk,)) in w.calls
        ),
    ),
    "run cancel (API)": (
        lambda w: f"/api/runs/{w.run.pk}/cancel/",
        lambda w, role: {"reason": f"by {role}"},
        "json",
        MANAGERS,
        lambda w, role: any(c[0] == "cancel" for c in w.calls),
    ),
    "run resume (API)": (
        lambda w: f"/api/runs/{w.interrupted.pk}/resume/",
        lambda w, role: {},
        "json",
        MANAGERS,
        lambda w, role: TrainingRun.objects.get(pk=w.interrupted.pk).status == "launching",
    ),
    "run rename and tag (API)": (
        lambda w: f"/api/runs/{w.run.pk}/",
        lambda w, role: {"name": f"named by {role}", "tags": ["matrix"]},
        "json-patch",
        MANAGERS,
        lambda w, role: TrainingRun.objects.filter(name=f"named by {role}").exists(),
    ),
    # --- the task library's pages -----------------------------------------------------------------
    "task edit (page)": (
        lambda w: f"/tasks/{w.versions[0].task.task_id}/edit/",
        lambda w, role: edit_form(w.versions[0], role),
        "form",
        CURATORS,
        lambda w, role: TaskVersion.objects.filter(task=w.versions[0].task).count() == 2,
    ),
    "task validate (page)": (
        lambda w: f"/tasks/{w.versions[0].task.task_id}/validate/",
        lambda w, role: {"number": 1},
        "form",
        CURATORS,
        lambda w, role: any(c[0] == "validate" for c in w.calls),
    ),
    "task quarantine (page, bulk)": (
        lambda w: "/tasks/",
        lambda w, role: {"action": "quarantine", "ids": [w.versions[0].pk], "reason": role},
        "form",
        CURATORS,
        lambda w, role: TaskVersion.objects.get(pk=w.versions[0].pk).quarantined,
    ),
    "task set pin (page)": (
        lambda w: "/tasksets/",
        lambda w, role: {
            "name": f"pin-{role}",
            "change_note": "pin",
            "trainable_only": "on",
            "source": "humaneval",
        },
        "form",
        CURATORS,
        lambda w, role: TaskSet.objects.filter(name=f"pin-{role}").exists(),
    ),
    # --- the task library's API -------------------------------------------------------------------
    "task edit (API)": (
        lambda w: f"/api/tasks/{w.versions[0].task.task_id}/versions/",
        lambda w, role: {
            "change_note": f"api edit by {role}",
            "prompt": w.versions[0].prompt + f"# {role}\n",
        },
        "json",
        CURATORS,
        lambda w, role: TaskVersion.objects.filter(task=w.versions[0].task).count() == 2,
    ),
    "task validate (API)": (
        lambda w: "/api/task-versions/validate/",
        lambda w, role: {"ids": [w.versions[0].pk]},
        "json",
        CURATORS,
        lambda w, role: any(c[0] == "validate" for c in w.calls),
    ),
    "task quarantine (API)": (
        lambda w: "/api/task-versions/quarantine/",
        lambda w, role: {"ids": [w.versions[0].pk], "reason": role},
        "json",
        CURATORS,
        lambda w, role: TaskVersion.objects.get(pk=w.versions[0].pk).quarantined,
    ),
    "task approve (API)": (
        lambda w: "/api/task-versions/approve/",
        lambda w, role: {"ids": [w.versions[1].pk], "reason": role},
        "json",
        CURATORS,
        lambda w, role: not TaskVersion.objects.get(pk=w.versions[1].pk).quarantined,
    ),
    "task set pin (API)": (
        lambda w: f"/api/task-sets/pin-{'x'}/pin/",
        lambda w, role: {"change_note": "pin", "versions": [w.versions[0].pk]},
        "json",
        CURATORS,
        lambda w, role: TaskSet.objects.filter(name="pin-x").exists(),
    ),
}

CASES = [(endpoint, role) for endpoint in ENDPOINTS for role in ROLES]


@pytest.mark.parametrize(("endpoint", "role"), CASES, ids=[f"{e} / {r}" for e, r in CASES])
def test_role_against_write(world, endpoint, role):
    path_of, data_of, kind, allowed, done = ENDPOINTS[endpoint]
    client = Client()
    if role != "anonymous":
        client.force_login(world.users[role])
    path, data = path_of(world), data_of(world, role)
    if kind == "json":
        response = client.post(path, data, content_type="application/json")
    elif kind == "json-patch":
        response = client.patch(path, data, content_type="application/json")
    else:
        response = client.post(path, data)
    location = response.get("Location", "")
    if role in allowed:
        assert 200 <= response.status_code < 400 and "/accounts/login/" not in location, (
            f"{role} refused at {endpoint}: {response.status_code} {response.content[:300]!r}"
        )
        assert done(world, role), (
            f"{role} was answered {response.status_code} at {endpoint} but nothing was written"
        )
    else:
        if role == "anonymous" and kind == "form":
            assert response.status_code == 302 and location.startswith("/accounts/login/"), (
                endpoint,
                response.status_code,
            )
        else:
            assert response.status_code in (401, 403), (
                f"{role} let through at {endpoint}: {response.status_code}"
            )
        assert not done(world, role), f"{role} was refused at {endpoint} but the write happened"


def test_every_role_is_in_the_table():
    assert {role for _, role in CASES} == set(ROLES) and len(CASES) == len(ENDPOINTS) * len(ROLES)


@pytest.mark.parametrize(
    "path",
    [
        "/review/",
        "/review/queues/new/",
        "/review/queues/1/",
        "/review/items/1/",
        "/review/drafts/1/",
        "/review/tasks/1/",
        "/runs/1/review/",
    ],
)
def test_anonymous_users_go_to_the_login_page_from_every_review_page(path):
    response = Client().get(path)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


def test_viewers_read_the_review_pages_but_see_no_write_controls(world):
    client = Client()
    client.force_login(world.users["viewer"])
    for path in (
        "/review/",
        f"/review/queues/{world.queue.pk}/",
        f"/review/items/{world.item.pk}/",
        f"/review/drafts/{world.draft.pk}/",
        f"/review/tasks/{world.versions[0].pk}/",
        f"/runs/{world.run.pk}/review/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        for control in (
            'id="label-form"',
            "assign-form",
            'id="submit-draft"',
            'id="draft-form"',
            'id="new-queue-link"',
        ):
            assert control not in html, (path, control)
    assert client.get("/review/queues/new/").status_code == 403
