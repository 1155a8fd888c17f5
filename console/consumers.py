"""Websocket consumer of one run's live events.

On connect the client says which sequence number it has seen (``?after=N``); the
consumer joins the run's group first, then sends what was persisted after N, so an
event recorded between the two is delivered (possibly twice: the client drops
sequence numbers it already has). Then it forwards live events as they come.

The back-fill is bounded (:func:`training.selectors.run_backfill_bounded`): the newest
steps in full, each with ``components`` (a binned histogram per reward component), older
ones summed into buckets of consecutive steps (``decimated``), then evaluations and
alerts, and a closing ``{"kind": "backfill"}`` marker.

Live events reach a server process once per run, not once per browser: the first watcher
of a run in a process starts a :class:`RunHub` that joins the run's group with a channel
of its own, and the hub hands each event to every local watcher, encoded once. A step
event, broadcast by ``training.services.step_record`` without ``components``, gets them
there: one query per step per process however many browsers watch. A watcher whose
back-fill is still being read gets the live events after it (held, in order).

Who may subscribe: the console's read rule (:mod:`core.access`, shared with its pages and
JSON APIs; the user comes from the session through Channels' ``AuthMiddlewareStack`` in
``console/asgi.py``). ``CRUCIBLE_CONSOLE_PUBLIC`` true (the default): anyone, read-only; false:
signed-in users with a role or ``training.view_trainingrun``. Anyone else is accepted and at
once closed with code **4403**, so the browser can tell "not allowed" from a network drop and
stops reconnecting. An unknown run is closed with **4404** (after the permission check, so the
code says nothing about runs one may not see).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import OrderedDict
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.events import run_group
from core.permissions import console_public, may_read_console
from training import selectors

log = logging.getLogger(__name__)

CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


# (run, step, reward_mean, histogram) -> the task computing that step's component histograms,
# per event loop: the first reader of a step queries, the others await its answer.
_COMPONENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict] = (
    weakref.WeakKeyDictionary()
)
_COMPONENTS_KEEP = 256


async def step_components(run_id: int, event: dict) -> dict:
    """The per-component histograms of a live step event (cached per process and loop)."""
    loop = asyncio.get_running_loop()
    cache = _COMPONENTS.setdefault(loop, OrderedDict())
    key = (run_id, event.get("step"), event.get("reward_mean"), tuple(event.get("histogram") or ()))
    task = cache.get(key)
    if task is None:
        task = loop.create_task(
            database_sync_to_async(selectors.step_event_components)(
                run_id=run_id, step=event["step"], metrics=event.get("metrics") or {}
            )
        )
        cache[key] = task
        while len(cache) > _COMPONENTS_KEEP:
            cache.popitem(last=False)
    try:
        return await asyncio.shield(task)
    except Exception:  # the step itself still goes out; the next reader retries
        cache.pop(key, None)
        log.warning(
            "could not read the component histograms of run %s step %s",
            run_id,
            event.get("step"),
            exc_info=True,
        )
        return {}


async def wire_event(run_id: int, event: dict) -> dict:
    """A live event as watchers get it: a step event with its ``components``."""
    if event.get("kind") == "step" and "components" not in event:
        event = {**event, "components": await step_components(run_id, event)}
    return event


class RunHub:
    """This process's one subscription to a run's group, fanning each event out to the local
    watchers.

    Channels' usual pattern (every consumer in the group) costs one Redis message, one decode
    and one JSON encoding per browser per event; the hub pays them once per process.
    """

    def __init__(self, layer, run_id: int) -> None:
        self.layer, self.run_id = layer, run_id
        self.watchers: set[RunConsumer] = set()
        self.lock = asyncio.Lock()
        self.channel: str | None = None
        self.task: asyncio.Task | None = None

    async def join(self, watcher: RunConsumer) -> None:
        """Add ``watcher``; on return the hub is in the group, so no later event is missed."""
        async with self.lock:
            self.watchers.add(watcher)
            if self.task is None:
                # the default prefix: channels_redis polls one list per process for all its channels
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(run_group(self.run_id), self.channel)
                self.task = asyncio.get_running_loop().create_task(self._pump(self.channel))

    async def leave(self, watcher: RunConsumer) -> None:
        async with self.lock:
            self.watchers.discard(watcher)
            if self.watchers or self.task is None:
                return
            task, channel, self.task, self.channel = self.task, self.channel, None, None
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
            try:
                await self.layer.group_discard(run_group(self.run_id), channel)
            except Exception:  # the membership expires by itself
                log.warning("could not leave the group of run %s", self.run_id, exc_info=True)

    async def _pump(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis away: the watchers back-fill on reconnect
                log.warning(
                    "run %s hub: receive failed; retrying in 1 s", self.run_id, exc_info=True
                )
                await asyncio.sleep(1)
                continue
            if message.get("type") != "run.event":
                continue
            try:
                event = await wire_event(self.run_id, message["event"])
                text = json.dumps(event)
            except Exception:  # one bad event must not stop the hub
                log.exception("run %s hub: could not encode an event", self.run_id)
                continue
            # all at once: a websocket send completes on the server's side (granian's writer)
            # and one awaited after another pays a loop round trip each, 500 in a row
            await asyncio.gather(*(watcher.deliver(text) for watcher in list(self.watchers)))


# event loop -> run id -> hub (a test's loop, or daphne's one loop)
_HUBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, RunHub]] = (
    weakref.WeakKeyDictionary()
)


def run_hub(layer, run_id: int) -> RunHub:
    hubs = _HUBS.setdefault(asyncio.get_running_loop(), {})
    if run_id not in hubs or hubs[run_id].layer is not layer:
        hubs[run_id] = RunHub(layer, run_id)
    return hubs[run_id]


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.live = False
        self.held: list[str] = []
        user = self.scope.get("user")
        # public: no thread hop to ask the database
        if not console_public() and not await database_sync_to_async(may_read_console)(
            user, self.run_id
        ):
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not await database_sync_to_async(selectors.run_exists)(run_id=self.run_id):
            await self.accept()
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            after = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            after = 0
        self.hub = run_hub(self.channel_layer, self.run_id)
        await self.hub.join(self)  # first: an event recorded during the back-fill is held, not lost
        await self.accept()
        backlog = await database_sync_to_async(selectors.run_backfill_bounded)(
            run_id=self.run_id, after=after
        )
        for event in backlog:
            await self.send_json(event)
        while self.held:
            await self.send(text_data=self.held.pop(0))
        self.live = True

    async def deliver(self, text: str) -> None:
        """A live event from the hub, already encoded: sent now, or held until the back-fill is
        out."""
        if not self.live:
            self.held.append(text)
            return
        try:
            await self.send(text_data=text)
        except Exception:  # a socket closing under us; its disconnect follows
            log.debug("run %s: could not send to a closing socket", self.run_id, exc_info=True)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "hub"):
            await self.hub.leave(self)

    async def run_event(self, message: dict) -> None:
        """An event sent to this consumer's own channel (the hub brings the group's)."""
        await self.send_json(await wire_event(self.run_id, message["event"]))
