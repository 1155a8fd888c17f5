"""Riding out a lost broker: wait for Redis for a bounded time, then retry what failed.

Redis carries the sandbox queue, the Celery messages and the live broadcasts. When it goes away
(killed, restarted, a network partition) a long-running process (the trainer, a sandbox batch)
must not fail for good: it waits until Redis answers again, for at most
``settings.CRUCIBLE_BROKER_WAIT_S`` seconds (``CRUCIBLE_BROKER_WAIT_S``, default 300), and then
retries; past that it raises :class:`BrokerLost`, which the trainer records as ``interrupted``
(resumable from its last checkpoint), never ``failed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from django.conf import settings
from kombu.exceptions import OperationalError

log = logging.getLogger(__name__)

T = TypeVar("T")

BROKER_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OperationalError,  # kombu's, when a Celery publish ran out of its own retries
)
"""The exceptions that mean "Redis could not be reached", not "the request was wrong"."""

POLL_FIRST_S = 0.25
POLL_MAX_S = 5.0


class BrokerLost(RuntimeError):
    """Redis did not answer for longer than the broker wait; the message says what was waiting,
    for how long, and the last error."""


def broker_wait_s() -> float:
    """Seconds a process waits for a lost Redis before giving up (``CRUCIBLE_BROKER_WAIT_S``)."""
    return float(settings.CRUCIBLE_BROKER_WAIT_S)


def _answers() -> bool:
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2
        )
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False


def await_broker(*, what: str, error: BaseException, deadline: float) -> None:
    """Block until Redis answers PING, polling with a back-off from 0.25 s to 5 s.

    Args:
        what: what is waiting, for the log and the error (``"run 12's rollouts"``).
        error: the broker error that started the wait.
        deadline: ``time.monotonic()`` past which to give up.

    Raises:
        BrokerLost: Redis did not answer by ``deadline``.
    """
    log.warning("%s lost Redis (%s: %s); waiting for it", what, type(error).__name__, error)
    if not poll_until(_answers, deadline=deadline):
        raise BrokerLost(
            f"{what}: Redis did not answer for {broker_wait_s():.0f} s "
            f"(CRUCIBLE_BROKER_WAIT_S); last error: {type(error).__name__}: {error}"
        ) from error
    log.warning("%s: Redis answers again; retrying", what)


def poll_until(check: Callable[[], bool], *, deadline: float) -> bool:
    """Call ``check`` until it returns True (then True) or ``time.monotonic()`` passes
    ``deadline`` (then False), sleeping between calls with a back-off from 0.25 s to 5 s."""
    pause = POLL_FIRST_S
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, POLL_MAX_S)
    return True


def broker_retry(
    fn: Callable[[], T], *, what: str, before_retry: Callable[[], None] | None = None
) -> T:
    """``fn()``, retried after Redis comes back whenever it raises a :data:`BROKER_ERRORS` error.

    The broker wait (:func:`broker_wait_s`) bounds the whole outage, counted from the first error.
    ``fn`` must be safe to run again from the start (``before_retry`` puts back what a failed
    attempt changed: a random generator's state).

    Raises:
        BrokerLost: Redis stayed away longer than the broker wait.
    """
    deadline: float | None = None
    while True:
        try:
            return fn()
        except BROKER_ERRORS as exc:
            if deadline is None:
                deadline = time.monotonic() + broker_wait_s()
            await_broker(what=what, error=exc, deadline=deadline)
            if before_retry is not None:
                before_retry()
