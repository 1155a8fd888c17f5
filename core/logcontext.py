"""What a log record is about: ``run_id``, ``step``, ``trajectory_id``, ``request_id``.

Code that knows sets the context once (a context variable, so each thread, asyncio task
and Celery task has its own), and every record logged inside carries the fields:

    with log_context(run_id=run.pk, step=step):
        log.warning("...")            # {"run_id": 7, "step": 3, ...} in JSON logs

:class:`ContextFilter` (on the handler in ``settings.LOGGING``) copies the fields that are
known onto each record; fields that are not known are left off. The JSON formatter
(python-json-logger) writes them as keys; :class:`PlainFormatter` appends them as
``[run_id=7 step=3]``. A new thread starts with an empty context: :func:`log_context_process`
sets fields for every thread of the process (a trainer process trains one run).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

FIELDS = ("run_id", "step", "trajectory_id", "request_id")
"""The context fields, in the order the plain format shows them."""

_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "crucible_log_context", default=None
)
_process: dict = {}


def _known(fields: dict) -> dict:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(
            f"unknown log context field(s) {sorted(unknown)}; known: {', '.join(FIELDS)}"
        )
    return {name: value for name, value in fields.items() if value is not None}


@contextmanager
def log_context(**fields) -> Iterator[None]:
    """Add ``fields`` (of :data:`FIELDS`; None values are ignored) to records logged inside the
    block.

    Raises:
        TypeError: a field that is not one of :data:`FIELDS`.
    """
    token = _context.set({**(_context.get() or {}), **_known(fields)})
    try:
        yield
    finally:
        _context.reset(token)


def log_context_bind(**fields) -> None:
    """Add ``fields`` to the current context until it ends (the rest of a loop iteration, a
    thread)."""
    _context.set({**(_context.get() or {}), **_known(fields)})


def log_context_process(**fields) -> None:
    """Add ``fields`` to every record of this process, whatever thread logs it."""
    _process.update(_known(fields))


def current() -> dict:
    """The fields known here: the process's, then the context's."""
    return {**_process, **(_context.get() or {})}


class ContextFilter(logging.Filter):
    """Copy the known context fields onto each record (a field the call passed in ``extra``
    wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class PlainFormatter(logging.Formatter):
    """The plain text format, with the record's context fields appended:
    ``... message [run_id=7 step=3]``."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        known = [
            f"{name}={getattr(record, name)}"
            for name in FIELDS
            if getattr(record, name, None) is not None
        ]
        if not known:
            return text
        first, newline, rest = text.partition("\n")  # after the message, before any traceback
        return f"{first} [{' '.join(known)}]{newline}{rest}"
