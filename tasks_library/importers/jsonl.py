"""Read a JSONL(.gz) dataset line by line, refusing bad input with file, line and field."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError

# A line carries a whole task version, workspace files included (each capped at 1 MiB, 8 MiB in
# all).
MAX_LINE_BYTES = 16 * 1024 * 1024


def read_jsonl(
    path: Path, required: tuple[str, ...], *, id_field: str | None = "task_id"
) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, row)`` for each non-blank line; ``where`` is ``"FILE:LINE"``.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: a line is not UTF-8, not a JSON object, lacks a ``required``
            field, has a non-string one, is over 16 MiB, or repeats an id (``id_field``; None checks
            none).
    """
    opener = gzip.open if path.suffix == ".gz" else open
    seen: set[str] = set()
    with opener(path, "rb") as handle:
        # readline with a cap: a gzip of one endless line (a few KB packing gigabytes of one
        # character) is refused after MAX_LINE_BYTES, not read into memory whole
        lines = iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b"")
        for lineno, raw in enumerate(lines, start=1):
            where = f"{path}:{lineno}"
            if len(raw) > MAX_LINE_BYTES:  # the rest of it is never read
                raise ImportFormatError(where, f"line is over the {MAX_LINE_BYTES} byte limit")
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFormatError(
                    where, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from exc
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(
                    where, f"not valid JSON ({exc.msg}, column {exc.colno})"
                ) from exc
            if not isinstance(row, dict):
                raise ImportFormatError(where, f"expected a JSON object, got {type(row).__name__}")
            for field in required:
                if field not in row:
                    raise ImportFormatError(where, f"missing field {field!r}", field=field)
                if not isinstance(row[field], str) or (
                    field == id_field and not row[field].strip()
                ):
                    raise ImportFormatError(
                        where, f"field {field!r} must be a non-empty string", field=field
                    )
            if id_field is None:
                yield where, row
                continue
            if row[id_field] in seen:
                raise ImportFormatError(
                    where, f"field {id_field!r}: duplicate id {row[id_field]!r}", field=id_field
                )
            seen.add(row[id_field])
            yield where, row


def first_text(row: dict, where: str, *names: str) -> tuple[str, str]:
    """``(name, text)`` of the first of ``names`` the row has (the same field under each name
    a dataset's variants use: ``text`` or ``prompt``).

    Raises:
        ImportFormatError: the row has none of them (naming the first), or that field is not
            a non-empty string.
    """
    for name in names:
        if name in row:
            if not isinstance(row[name], str) or not row[name].strip():
                raise ImportFormatError(
                    where, f"field {name!r} must be a non-empty string", field=name
                )
            return name, row[name]
    others = f" (or {', '.join(names[1:])})" if len(names) > 1 else ""
    raise ImportFormatError(where, f"missing field {names[0]!r}{others}", field=names[0])
