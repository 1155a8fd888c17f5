"""Text that every supported database can store: PostgreSQL's ``text`` and ``jsonb`` refuse
U+0000 (``PostgreSQL text fields cannot contain NUL (0x00) bytes``), SQLite takes it.

A sampled policy (byte-level tokens can decode to NUL) and a sandboxed program's output are
untrusted text; their writers pass it through :func:`storable`. The exact sampled tokens stay
in the token-id columns, so nothing is lost for training or replay.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"
REPLACEMENT = "\ufffd"
"""U+FFFD, as the sandboxes already decode undecodable output bytes."""


def storable(value: Any) -> Any:
    """``value`` with each NUL character replaced by U+FFFD, in strings nested in dicts (keys
    included), lists and tuples too; other values are returned as they are."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT) if NUL in value else value
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(storable(item) for item in value)
    return value
