"""Broadcast persisted run events to the browsers watching that run.

Events are always written to the database first; the broadcast only tells live
clients. A client that missed one reads it back from the database on reconnect.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    """The Channels group of one run's watchers."""
    return f"run-{run_id}"


def broadcast_run_event(run_id: int, event: dict) -> None:
    """Send ``event`` to the run's group; a broker outage is logged, never raised,
    because the event is already persisted and clients back-fill from the database."""
    try:
        async_to_sync(get_channel_layer().group_send)(
            run_group(run_id), {"type": "run.event", "event": event}
        )
    except Exception:  # live push is best effort over a durable record
        log.warning("could not broadcast event of run %s", run_id, exc_info=True)
