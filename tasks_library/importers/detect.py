"""Tell a JSONL dataset's shape from its first row, so ``import_tasks --format jsonl FILE``
reads MBPP-shaped, stdin/stdout, HumanEval-shaped and Crucible-format files with no
preprocessing and no field mapping."""

from __future__ import annotations

from pathlib import Path

from tasks_library.importers.jsonl import read_jsonl
from tasks_library.importers.stdio import row_shape

# Shapes, in the order they are tried: the first whose telltale fields the row has wins.
SHAPES = ("crucible", "mbpp", "stdio", "humaneval", "fields")


def row_kind(row: dict) -> str:
    """The shape of one row: ``crucible`` (``format`` is Crucible's), ``mbpp`` (a
    ``test_list``), ``stdio`` (APPS, CodeContests or input/output cases), ``humaneval``
    (``canonical_solution`` and ``test``), else ``fields`` (Crucible task fields under their
    own names, or a ``--map``)."""
    if isinstance(row.get("format"), str) and row["format"].startswith("crucible.task/"):
        return "crucible"
    if "test_list" in row:
        return "mbpp"
    if row_shape(row) is not None:
        return "stdio"
    if "canonical_solution" in row and "test" in row:
        return "humaneval"
    return "fields"


def detect_shape(path: Path) -> str:
    """The shape of a JSONL(.gz) file's first row (see :func:`row_kind`); ``fields`` for a
    file with no row (the import then says it holds no task).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: the first line is not a JSON object (file and line named).
    """
    for _where, row in read_jsonl(path, (), id_field=None):
        return row_kind(row)
    return "fields"
