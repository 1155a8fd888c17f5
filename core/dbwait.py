"""Riding out a lost database: wait for it for a bounded time, then retry what failed.

A PostgreSQL restart (a failover, an upgrade, a crash) drops every connection and refuses new
ones for a while. A long-running process (the trainer) must not fail a week-long run for it:
:func:`db_retry` closes the broken connection, waits until the database answers again (for at
most ``settings.CRUCIBLE_DATABASE_WAIT_S`` seconds, ``CRUCIBLE_DATABASE_WAIT_S``, default 300)
and runs the call again. Past the wait it raises :class:`DatabaseLost`.

A retried call must be safe to run again: a write under one ``transaction.atomic`` block (rolled
back whole when the connection dropped), or one that first looks whether it landed already.
Inside a caller's transaction nothing is retried (the transaction is gone with its connection):
the error goes up to the caller's own retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from core.broker import poll_until

log = logging.getLogger(__name__)

T = TypeVar("T")

DB_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
"""Django's errors for "the database could not be reached or dropped the connection"."""


class DatabaseLost(RuntimeError):
    """The database did not answer for longer than the database wait."""


def database_wait_s() -> float:
    """Seconds a process waits for a lost database (``CRUCIBLE_DATABASE_WAIT_S``)."""
    return float(settings.CRUCIBLE_DATABASE_WAIT_S)


def _reconnects() -> bool:
    try:
        connection.close()
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DB_ERRORS:
        return False


def db_retry(fn: Callable[[], T], *, what: str) -> T:
    """``fn()``, run again once the database answers whenever it raises a :data:`DB_ERRORS` error.

    Args:
        fn: a call that is safe to run again from the start (see the module docstring).
        what: what is waiting, for the log and the error.

    Raises:
        DatabaseLost: the database stayed away longer than the database wait (counted from the
            first error).
    """
    deadline: float | None = None
    while True:
        try:
            return fn()
        except DB_ERRORS as exc:
            if connection.in_atomic_block:
                raise
            if deadline is None:
                deadline = time.monotonic() + database_wait_s()
                log.warning("%s lost the database (%s); waiting for it", what, exc)
            if not poll_until(_reconnects, deadline=deadline):
                raise DatabaseLost(
                    f"{what}: the database did not answer for {database_wait_s():.0f} s "
                    f"(CRUCIBLE_DATABASE_WAIT_S); last error: {type(exc).__name__}: {exc}"
                ) from exc
            log.warning("%s: the database answers again; retrying", what)
