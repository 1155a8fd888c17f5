"""Writing a step's turns in bulk: PostgreSQL ``COPY``, SQLite one prepared ``executemany``.

A step of an agent run holds thousands of turns of kilobytes each (tool outputs, a thousand
observation ids). Django's ``bulk_create`` quotes every value in Python into one huge statement
(on PostgreSQL it binds whole columns as arrays, client side); that quoting, not the database,
was most of the trajectory writer's time. ``COPY ... FROM STDIN`` streams the rows in
PostgreSQL's copy format through psycopg 3 (https://www.psycopg.org/psycopg3/docs/basic/copy.html);
SQLite prepares one ``INSERT`` and runs it per row in C.

Both run on the caller's connection, inside its transaction: :func:`turns_write` is called from
``training.services.step_record``'s ``atomic`` block, so a failed write leaves no partial step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from django.db import connection

from core.dbtext import storable
from core.packed import pack
from training.models import Turn
from training.turn_outputs import outputs_referenced

COLUMNS = (
    "trajectory_id",
    "index",
    "action",
    "policy_text",
    "token_ids",
    "logprobs",
    "code",
    "observation",
    "observation_token_ids",
    "sandbox_status",
    "sandbox_result",
)
"""The order of a row's values for :func:`turns_write`."""


def _encoded(row: tuple) -> tuple:
    """A row's values as the columns take them: packed id and log-prob arrays, JSON text, and
    every NUL character replaced (``core.dbtext``: PostgreSQL's text and jsonb refuse it)."""
    (
        trajectory_id,
        index,
        action,
        policy_text,
        token_ids,
        logprobs,
        code,
        observation,
        observation_ids,
        status,
        result,
    ) = row
    return (
        trajectory_id,
        index,
        action,
        storable(policy_text),
        _packed(token_ids, "i", "token_ids", index),
        _packed(logprobs, "d", "logprobs", index),
        storable(code),
        storable(observation),
        _packed(observation_ids, "i", "observation_token_ids", index),
        status,
        _json_text(outputs_referenced(result, observation)),  # each output stored once
    )


def _packed(values, typecode: str, column: str, index: int) -> bytes:
    try:
        return pack(values, typecode)
    except (TypeError, OverflowError) as exc:
        raise TypeError(f"turn {index}: {column}: {exc}") from exc


def _json_text(value) -> str:
    """``value`` as JSON text with no NUL character. JSON writes NUL as ``\\u0000``, so a text
    without that sequence needs no walk of the value (the common case: one scan of the text)."""
    text = json.dumps(value)
    return json.dumps(storable(value)) if "\\u0000" in text else text


def turns_write(rows: Iterable[tuple]) -> int:
    """Insert turns, one tuple per turn in :data:`COLUMNS` order (ids and log-probs as lists,
    ``sandbox_result`` a dict; the policy's and the sandbox's text as they came: NUL characters
    are replaced here).

    Returns the number of turns written.

    Raises:
        TypeError: an id outside int32 or a value of the wrong type, naming the turn and the
            column (nothing is written: the caller's transaction rolls back).
        django.db.IntegrityError: a turn of a trajectory that does not exist, or a repeated
            ``(trajectory, index)``.
    """
    table = Turn._meta.db_table
    names = ", ".join(f'"{Turn._meta.get_field(_field(c)).column}"' for c in COLUMNS)
    count = 0
    with connection.cursor() as cursor, connection.wrap_database_errors:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(_encoded(row))
                    count += 1
            return count
        encoded = [_encoded(row) for row in rows]
        marks = ", ".join(["%s"] * len(COLUMNS))
        cursor.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', encoded)
        return len(encoded)


def _field(column: str) -> str:
    return column.removesuffix("_id") if column == "trajectory_id" else column
