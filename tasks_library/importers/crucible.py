"""Crucible's own task format: JSONL, one task version a line, everything needed to rebuild it.

A line (``"format": "crucible.task/1"``)::

    {"format": "crucible.task/1", "task_id": "HumanEval/0", "source": "humaneval",
     "tags": ["strings"], "prompt": "...", "entry_point": "has_close_elements",
     "reference_solution": "...", "files": {"data/input.csv": "..."},
     "environment": {"name": "python", "runtime": "python3.11", "packages": [], "image": "..."},
     "test_suite": {"harness": "python-check", "visible_tests": "...", "hidden_tests": "...",
                    "timeout_s": 10.0, "test_timeout_s": 2.0, "setup_code": "..."},
     "content_hash": "...", "change_note": "...", "author": "..."}

``content_hash``, ``change_note`` and ``author`` are informative on import: the hash
is recomputed from the content, so ``export_tasks`` then ``import_tasks --format
crucible`` on another database yields the same hashes (the round trip is tested).
Test ids are recomputed by the harness, never read from the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import read_jsonl

FORMAT = "crucible.task/1"


def examples_path() -> Path:
    """Worked examples of the verifiers beyond unit tests, shipped with Crucible: a data
    analysis (a CSV in, numbers out, checked within a tolerance), a file transformation
    (an output file compared with the expected one) and a custom checker (partial credit)."""
    return shipped_path("verifier_examples")


def shipped_path(name: str) -> Path:
    """A task file shipped in ``tasks_library/data/`` (``data_analysis``: numpy/pandas tasks;
    ``python_versions``: tasks for Python 3.13)."""
    return Path(__file__).resolve().parents[1] / "data" / f"{name}.jsonl"


REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "reference_solution")


def export_record(version) -> dict:
    """One task version (a :class:`~tasks_library.models.TaskVersion`) as a format line's object."""
    suite, env = version.test_suite, version.environment
    record = {
        "format": FORMAT,
        "task_id": version.task.task_id,
        "source": version.task.source,
        "tags": list(version.task.tags),
        "prompt": version.prompt,
        "entry_point": version.entry_point,
        "reference_solution": version.reference_solution,
        "environment": {
            "name": env.name,
            "runtime": env.runtime,
            "packages": list(env.packages),
            "image": env.image,
        },
        "test_suite": {
            "harness": suite.harness,
            "visible_tests": suite.visible_tests,
            "hidden_tests": suite.hidden_tests,
            "timeout_s": suite.timeout_s,
        },
        "content_hash": version.content_hash,
        "change_note": version.change_note,
        "author": version.author,
    }
    if version.files:
        record["files"] = dict(version.files)
    if suite.test_timeout_s is not None:
        record["test_suite"]["test_timeout_s"] = suite.test_timeout_s
    if suite.setup_code:
        record["test_suite"]["setup_code"] = suite.setup_code
    return record


def read_crucible(path: Path) -> Iterator[dict]:
    """Yield task records from a Crucible-format JSONL(.gz) file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: as :func:`~tasks_library.importers.jsonl.read_jsonl`, a
            missing or foreign ``format``, or a ``test_suite`` that is not an object
            with ``hidden_tests`` text.
    """
    for where, row in read_jsonl(path, REQUIRED_FIELDS):
        if row.get("format") != FORMAT:
            raise ImportFormatError(
                where,
                f"field 'format': expected {FORMAT!r}, got {row.get('format')!r}",
                field="format",
            )
        suite = row.get("test_suite")
        if not isinstance(suite, dict):
            raise ImportFormatError(
                where,
                "missing field 'test_suite' (an object with harness, hidden_tests, ...)",
                field="test_suite",
            )
        for key in ("harness", "hidden_tests"):
            if not isinstance(suite.get(key), str):
                raise ImportFormatError(
                    where,
                    f"field 'test_suite.{key}' missing or not a string",
                    field=f"test_suite.{key}",
                )
        visible = suite.get("visible_tests")
        if visible is not None and not isinstance(visible, str):
            raise ImportFormatError(
                where,
                "field 'test_suite.visible_tests' must be a string",
                field="test_suite.visible_tests",
            )
        if "environment" not in row:
            raise ImportFormatError(where, "missing field 'environment'", field="environment")
        yield {
            "task_id": row["task_id"],
            "source": row.get("source") if isinstance(row.get("source"), str) else None,
            "tags": row.get("tags", []),
            "prompt": row["prompt"],
            "entry_point": row["entry_point"],
            "reference_solution": row["reference_solution"],
            "files": row.get("files"),
            "environment": row["environment"],
            "harness": suite["harness"],
            "tests": suite["hidden_tests"],
            "visible_tests": visible,
            "timeout_s": suite.get("timeout_s", 10.0),
            "test_timeout_s": suite.get("test_timeout_s"),
            "setup_code": suite.get("setup_code") or "",
            "change_note": row.get("change_note")
            if isinstance(row.get("change_note"), str)
            else None,
            "where": where,
        }
