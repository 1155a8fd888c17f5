"""Who may subscribe to a run's live events (console/consumers.py), through the real ASGI stack
(origin check, Channels' AuthMiddlewareStack reading the Django session, the consumer):
anonymous viewers while the console is public (the default); with CRUCIBLE_CONSOLE_PUBLIC off,
only signed-in users with ``training.view_trainingrun``, a role group, or superusers; everyone
else is closed with 4403, an unknown run with 4404."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.test import Client

from console.asgi import application
from tasks_library.models import TaskSet
from tests.tasks_library.conftest import PASSWORD, make_user, roles  # noqa: F401 (fixture)
from training.models import TrainingRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(roles) -> TrainingRun:
    return TrainingRun.objects.create(
        task_set=TaskSet.objects.create(name="watched"), total_steps=3, status=TrainingRun.RUNNING
    )


def session_cookie(user: User | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", b"http://127.0.0.1")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


def subscribe(run_id: int, user: User | None) -> tuple[str, object]:
    """``("events", [kinds...])`` up to the back-fill marker, or ``("closed", code)``."""
    headers = session_cookie(user)  # the ORM, outside the event loop

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
        connected, code = await communicator.connect(timeout=10)
        if not connected:
            return "refused", code
        kinds = []
        while True:
            message = await communicator.receive_output(timeout=10)
            if message["type"] == "websocket.close":
                await communicator.wait()
                return "closed", message.get("code")
            kinds.append(json.loads(message["text"])["kind"])
            if kinds[-1] == "backfill":
                await communicator.disconnect()
                return "events", kinds

    return async_to_sync(go)()


def test_public_console_lets_anonymous_viewers_watch(run, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = True
    outcome, kinds = subscribe(run.pk, None)
    assert outcome == "events" and kinds[0] == "status" and kinds[-1] == "backfill"


def test_public_is_the_default_and_the_environment_can_turn_it_off(run):
    assert subscribe(run.pk, None)[0] == "events"  # the test settings leave the default

    def setting(value):
        env = {k: v for k, v in os.environ.items() if k != "CRUCIBLE_CONSOLE_PUBLIC"}
        if value is not None:
            env["CRUCIBLE_CONSOLE_PUBLIC"] = value
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import django; django.setup(); from django.conf import settings; "
                "print(settings.CRUCIBLE_CONSOLE_PUBLIC)",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert setting(None) == "True" and setting("0") == "False" and setting("true") == "True"


def test_private_console_closes_anonymous_and_roleless_users_with_4403(run, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    assert subscribe(run.pk, None) == ("closed", 4403)
    assert subscribe(run.pk, make_user("nobody", None)) == ("closed", 4403)
    inactive = make_user("gone", "viewers")
    inactive.is_active = False
    inactive.save()
    assert subscribe(run.pk, inactive) == ("closed", 4403)


def test_private_console_admits_roles_the_permission_and_superusers(run, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    holder = make_user("otto", None)
    holder.user_permissions.add(Permission.objects.get(codename="view_trainingrun"))
    admin = User.objects.create_superuser("root", password=PASSWORD)
    for user in (make_user("vic", "viewers"), make_user("cora", "curators"), holder, admin):
        outcome, kinds = subscribe(run.pk, user)
        assert outcome == "events" and "status" in kinds, user.username


def test_unknown_run_is_closed_with_4404_but_only_for_those_allowed(run, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    assert subscribe(999999, make_user("vic", "viewers")) == ("closed", 4404)
    assert subscribe(999999, None) == ("closed", 4403)  # says nothing about which runs exist


def test_pool_api_and_components_api_follow_the_same_rule(run, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    # Not signed in: 401 with the challenge a script answers with an API key.
    assert Client().get("/api/sandboxes/pool/").status_code == 401
    assert (
        Client().get(f"/api/runs/{run.pk}/components/", {"first": 1, "last": 2}).status_code == 401
    )
    roleless = Client()
    roleless.force_login(make_user("nobody", None))
    assert roleless.get("/api/sandboxes/pool/").status_code == 403
    viewer = Client()
    viewer.force_login(make_user("vic", "viewers"))
    assert viewer.get(f"/api/runs/{run.pk}/components/", {"first": 1, "last": 2}).status_code == 200
    assert viewer.get("/sandboxes/").status_code == 200
