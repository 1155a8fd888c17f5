"""Websocket consumer of one run's live events.

On connect the client says which sequence number it has seen (``?after=N``); the
consumer joins the run's group first, then sends every persisted step after N, so
an event recorded between the two is delivered (possibly twice: the client drops
sequence numbers it already has). Then it forwards live events as they come.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.events import run_group
from training import selectors


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await database_sync_to_async(selectors.run_exists)(run_id=self.run_id):
            await self.close(code=4404)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            after = int(query.get("after", ["0"])[0])
        except ValueError:
            after = 0
        self.group = run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        backlog = await database_sync_to_async(selectors.run_backfill)(run_id=self.run_id, after=after)
        for event in backlog:
            await self.send_json(event)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_event(self, message: dict) -> None:
        await self.send_json(message["event"])
