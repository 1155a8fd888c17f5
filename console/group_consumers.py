"""Websocket consumers of the console's live pages besides a run's own (``console.consumers``):
the runs table and an environment version's build.

Each joins one Channels group (``core.events``), then sends what is persisted now, then
forwards the group's events, so an event written between the join and the snapshot is not lost
(it may come twice: each event holds the whole state of what it describes, so a second copy
changes nothing). A page that reconnects gets the snapshot again.

* ``ws/runs/`` (:class:`RunsTableConsumer`): the runs table. Every run's row change (status,
  steps, the newest step's metrics, warnings) arrives as a ``{"kind": "run_row"}`` event
  (``training.selectors.run_row_event``); no snapshot: the page was rendered from the database
  and, after a reconnect, reads ``GET /api/runs/`` again.
* ``ws/environments/<id>/`` (:class:`EnvironmentBuildConsumer`): an environment version's build
  (``tasks_library.environments.environment_build_event``), the row's state first.

Who may subscribe: the console's read rule for the runs table (as ``console.consumers``), the
task library's (a sign-in) for an environment. Anyone else is accepted and at once closed with
**4403**; an unknown environment with **4404**.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.events import RUNS_GROUP, environment_group
from core.permissions import may_read_console, may_read_library
from tasks_library.environments import environment_build_event
from tasks_library.models import EnvironmentVersion

CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class GroupConsumer(AsyncJsonWebsocketConsumer):
    """Join :meth:`group`, send :meth:`snapshot`, forward the group's events."""

    group: str | None = None

    def allowed(self, user) -> bool:
        raise NotImplementedError

    def group_name(self) -> str:
        raise NotImplementedError

    def snapshot(self) -> list[dict] | None:
        """The persisted state as events (called in a thread); None: the object is gone."""
        return []

    async def connect(self) -> None:
        if not await database_sync_to_async(self.allowed)(self.scope.get("user")):
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        group = self.group_name()
        await self.channel_layer.group_add(group, self.channel_name)
        self.group = group
        await self.accept()
        events = await database_sync_to_async(self.snapshot)()
        if events is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        for event in events:
            await self.send_json(event)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_event(self, message: dict) -> None:
        """An event of the group (``core.events.broadcast_event``)."""
        await self.send_json(message["event"])


class RunsTableConsumer(GroupConsumer):
    def allowed(self, user) -> bool:
        return may_read_console(user)

    def group_name(self) -> str:
        return RUNS_GROUP


class EnvironmentBuildConsumer(GroupConsumer):
    def allowed(self, user) -> bool:
        return may_read_library(user)

    def group_name(self) -> str:
        return environment_group(self.scope["url_route"]["kwargs"]["environment_id"])

    def snapshot(self) -> list[dict] | None:
        environment_id = self.scope["url_route"]["kwargs"]["environment_id"]
        environment = EnvironmentVersion.objects.filter(pk=environment_id).first()
        return None if environment is None else [environment_build_event(environment)]
