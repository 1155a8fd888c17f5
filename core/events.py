"""Broadcast persisted events to the browsers watching them: one run's page (its group per run),
the runs table (every run's row changes) and an environment's page (its build).

Events are always written to the database first; the broadcast only tells live
clients. A client that missed one reads it back from the database on reconnect.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core.response_cache import bump_epoch

log = logging.getLogger(__name__)


RUNS_GROUP = "runs"
"""The Channels group of the runs table's watchers: one compact row event per change of any run."""


def run_group(run_id: int) -> str:
    """The Channels group of one run's watchers."""
    return f"run-{run_id}"


def environment_group(environment_id: int) -> str:
    """The Channels group of one environment version's watchers (its page follows its build)."""
    return f"environment-{environment_id}"


def broadcast_event(group: str, event: dict) -> None:
    """Send ``event`` to ``group`` (consumers receive it as a ``run.event`` message); a broker
    outage is logged, never raised, because the event is already persisted and clients back-fill
    from the database."""
    bump_epoch()  # what the event reports is persisted: no kept answer may hide it
    try:
        async_to_sync(get_channel_layer().group_send)(group, {"type": "run.event", "event": event})
    except Exception as exc:  # live push is best effort over a durable record
        # one line (a command run without Redis says why, not a traceback); the stack at debug
        log.warning("could not broadcast an event to %s: %s: %s", group, type(exc).__name__, exc)
        log.debug("broadcast to %s failed", group, exc_info=True)


def broadcast_run_event(run_id: int, event: dict) -> None:
    """Send ``event`` to the run's group (:func:`broadcast_event`)."""
    broadcast_event(run_group(run_id), event)
