"""Import any JSONL dataset without code: a field mapping says where each task field lives.

``import_tasks --format jsonl FILE --map prompt=question --map reference_solution=answer.code``
reads ``row["question"]`` as the prompt and ``row["answer"]["code"]`` as the reference
(dotted paths walk nested objects). Unmapped fields are read under their own names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import read_jsonl

# Crucible task field -> required?
TASK_FIELDS = {
    "task_id": True,
    "prompt": True,
    "entry_point": True,
    "reference_solution": True,
    "tests": True,
    "visible_tests": False,
    "tags": False,
    "files": False,
}


def parse_mapping(pairs: list[str]) -> dict[str, str]:
    """``["prompt=question", ...]`` as ``{"prompt": "question"}``.

    Raises:
        ImportFormatError: a pair without ``=``, an unknown task field, or one mapped twice.
    """
    mapping: dict[str, str] = {}
    for pair in pairs:
        target, sep, source = pair.partition("=")
        target, source = target.strip(), source.strip()
        if not sep or not target or not source:
            raise ImportFormatError(
                f"--map {pair!r}", "expected TASK_FIELD=DATASET_FIELD, e.g. prompt=question"
            )
        if target not in TASK_FIELDS:
            raise ImportFormatError(
                f"--map {pair!r}", f"unknown task field {target!r}; known: {', '.join(TASK_FIELDS)}"
            )
        if target in mapping:
            raise ImportFormatError(f"--map {pair!r}", f"{target!r} is mapped twice")
        mapping[target] = source
    return mapping


def _lookup(row: dict, dotted: str):
    value = row
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def read_mapped(
    path: Path, mapping: dict[str, str], *, harness: str = "python-check"
) -> Iterator[dict]:
    """Yield task records from a JSONL(.gz) file whose fields ``mapping`` names.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`, or a
            mapped field that is missing or not text (the message names the dataset's field
            and the task field it maps to).
    """
    for where, row in read_jsonl(path, (), id_field=None):
        record = {"harness": harness, "where": where}
        for target, required in TASK_FIELDS.items():
            source = mapping.get(target, target)
            try:
                value = _lookup(row, source)
            except KeyError:
                if required:
                    hint = (
                        "" if target in mapping else f" (map it with --map {target}=DATASET_FIELD)"
                    )
                    raise ImportFormatError(
                        where, f"missing field {source!r} for {target}{hint}", field=source
                    ) from None
                continue
            if target in ("tags", "files"):
                record[target] = value
            elif not isinstance(value, str) or (target == "task_id" and not value.strip()):
                raise ImportFormatError(
                    where,
                    f"field {source!r} (mapped to {target}) must be a non-empty string",
                    field=source,
                )
            else:
                record[target] = value
        yield record
