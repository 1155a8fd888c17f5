"""The runs table's and an environment's websockets (console/group_consumers.py), through the real
ASGI stack and channel layer: the runs table gets each run's row as it changes (persisted, then
broadcast); an environment's page gets the row's build state first, then each change; readers
follow the console's and the task library's rules (4403), an unknown environment is 4404."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from console.asgi import application
from tasks_library.environments import environment_build, environment_create
from tests.console.test_websocket_auth import session_cookie
from tests.tasks_library.conftest import make_user, roles  # noqa: F401 (fixture)
from tests.training.conftest import one_task_run
from training import services
from training.models import TrainingRun

pytestmark = pytest.mark.django_db(transaction=True)


def listen(path: str, headers, then=None, count: int = 1) -> tuple[str, object]:
    """``("events", [event...])`` (``count`` of them, after ``then()`` ran in a thread), or
    ``("closed", code)``."""

    async def go():
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect(timeout=10)
        if not connected:
            return "refused", code
        if then is not None:
            from channels.db import database_sync_to_async  # noqa: PLC0415 (only here)

            await database_sync_to_async(then)()
        events = []
        while len(events) < count:
            message = await communicator.receive_output(timeout=10)
            if message["type"] == "websocket.close":
                await communicator.wait()
                return "closed", message.get("code")
            events.append(json.loads(message["text"]))
        await communicator.disconnect()
        return "events", events

    return async_to_sync(go)()


def test_the_runs_table_hears_each_change_of_a_row(roles):
    run = one_task_run()
    headers = session_cookie(None)
    outcome, events = listen(
        "/ws/runs/",
        headers,
        then=lambda: services.run_transition(run_id=run.pk, to_status=TrainingRun.LAUNCHING),
    )
    assert outcome == "events"
    (row,) = events
    assert (row["kind"], row["id"], row["status"], row["steps_done"]) == (
        "run_row", run.pk, "launching", 0
    )  # fmt: skip


def test_an_environment_page_gets_its_build_then_each_change(roles):
    environment = environment_create(name="plain", runtime="python3.11", packages=[], author="a")
    viewer = make_user("vic", "viewers")
    headers = session_cookie(viewer)

    def build():  # what the build job does (the host's runtime: nothing to build, at once)
        environment_build(environment=environment)

    outcome, events = listen(f"/ws/environments/{environment.pk}/", headers, then=build, count=3)
    assert outcome == "events"
    assert [e["build_status"] for e in events] == ["unbuilt", "building", "built"]
    assert events[2]["build_key"] == "host-python3.11" and events[2]["built_at"]
    assert listen("/ws/environments/999999/", headers) == ("closed", 4404)
    assert listen(f"/ws/environments/{environment.pk}/", session_cookie(None)) == ("closed", 4403)


def test_a_private_console_refuses_the_runs_table_to_strangers(roles, settings):
    settings.CRUCIBLE_CONSOLE_PUBLIC = False
    assert listen("/ws/runs/", session_cookie(None)) == ("closed", 4403)
    assert listen("/ws/runs/", session_cookie(make_user("nobody", None))) == ("closed", 4403)
