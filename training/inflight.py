"""Which run launches are in flight on the Celery broker (Redis), read from the broker itself.

The database is the source of truth for a run; the broker only carries the message that starts
it. A ``pending`` run whose launch message is neither waiting in its queue nor held by a worker
(kombu's ``unacked`` hash, where a late-acknowledged message stays until its task ends) was lost:
a Redis restart without persistence, a ``FLUSHALL``, a failed publish. The reconcile loop
(training/reconcile.py) asks :func:`launches_in_flight` and sends such a run's launch again;
sending it twice is harmless, since the launch claims the run under a row lock first.

Only kombu's Redis transport is read (the only broker Crucible configures); its layout: one list
per queue (``NAME``, and ``NAME\\x06\\x16P`` for priority ``P`` in 3, 6, 9) holding JSON
messages, and the ``unacked`` hash mapping a delivery tag to ``[message, exchange, routing_key]``.
"""

from __future__ import annotations

import ast
import json
import logging

from celery import current_app

from training.routing import RUN_LAUNCH

log = logging.getLogger(__name__)

PRIORITIES = (0, 3, 6, 9)  # kombu's default priority steps for Redis
UNACKED_KEY = "unacked"  # kombu.transport.redis.Channel.unacked_key
PRIORITY_SEP = "\x06\x16"  # kombu.transport.redis.Channel.sep


def _launched_run(raw: bytes | str) -> int | None:
    """The run id of a ``run_launch`` message (its JSON as kombu stores it), else None."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # an unacked entry: [message, exchange, routing_key]
            message = message[0]
        headers = message.get("headers") or {}
        if headers.get("task") != RUN_LAUNCH:
            return None
        args = ast.literal_eval(headers.get("argsrepr") or "()")
        if args:
            return int(args[0])
        kwargs = ast.literal_eval(headers.get("kwargsrepr") or "{}")
        return int(kwargs["run_id"]) if "run_id" in kwargs else None
    except (ValueError, TypeError, SyntaxError, KeyError, AttributeError, IndexError):
        return None


def queue_keys(queue: str) -> list[str]:
    """The Redis lists holding ``queue``'s messages: one per priority step."""
    return [
        queue if not priority else f"{queue}{PRIORITY_SEP}{priority}" for priority in PRIORITIES
    ]


def launches_in_flight(queues: list[str]) -> set[int]:
    """The run ids whose ``run_launch`` message waits in one of ``queues`` or is held by a worker.

    Args:
        queues: the Celery queue names to look in (``trainer``, ``control``).

    Returns:
        Run ids. A message that cannot be read (another producer's format) counts for no run.

    Raises:
        Exception: the broker could not be reached (kombu's or redis-py's error); the caller
            then knows nothing and must not re-dispatch.
    """
    with current_app.connection_for_read() as connection:
        client = connection.default_channel.client
        messages = [
            raw
            for queue in queues
            for key in queue_keys(queue)
            for raw in client.lrange(key, 0, -1)
        ]
        messages += client.hvals(UNACKED_KEY)
    return {run_id for run_id in map(_launched_run, messages) if run_id is not None}
