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

A repository task's line (its suite's harness ``pytest-repo``) holds its repository instead
of test source: ``"workspace": {"files": {path: text}, "binary": {path: base64}}`` (the buggy
tree), ``"test_suite": {"harness": "pytest-repo", "fail_to_pass": [...], "pass_to_pass":
[...], "hidden_files": {"files": ...}, "test_command": "pytest", "timeout_s": 120.0}``,
``prompt`` (the problem statement), ``reference_solution`` (the reference patch), and the
task's ``licence`` and ``metadata``. A line is at most 16 MiB (the JSONL reader's limit), which
bounds an exported repository's text.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from pathlib import Path

from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import read_jsonl
from tasks_library.repositories import RepositoryTaskRecord

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
    """One task version (a :class:`~tasks_library.models.TaskVersion`) as a format line's object.

    Raises:
        ValueError: a terminal task (a task directory: ``export_tasks --format harbor``).
    """
    if version.is_terminal:
        raise ValueError(
            f"{version} is a terminal task, a task directory: export it with --format harbor"
        )
    if version.is_repository:
        return _export_repository(version)
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


def _tree_out(files: dict[str, bytes]) -> dict:
    """A file tree as JSON: UTF-8 text under ``files``, other bytes base64 under ``binary``."""
    text, binary = {}, {}
    for path, content in sorted(files.items()):
        try:
            text[path] = content.decode("utf-8")
        except UnicodeDecodeError:
            binary[path] = base64.b64encode(content).decode("ascii")
    return {"files": text, "binary": binary} if binary else {"files": text}


def _tree_in(tree, *, where: str, name: str) -> dict[str, bytes]:
    """The file tree :func:`_tree_out` wrote (``{"files": {path: text}, "binary": {path:
    base64}}``) as ``{path: bytes}``.

    Raises:
        ImportFormatError: not that shape (``name`` and the path at fault named).
    """
    if not isinstance(tree, dict) or not isinstance(tree.get("files", {}), dict):
        raise ImportFormatError(
            where, f"field '{name}': expected {{\"files\": {{path: text}}}}", field=name
        )
    files: dict[str, bytes] = {}
    for path, text in tree.get("files", {}).items():
        if not isinstance(text, str):
            raise ImportFormatError(
                where, f"field '{name}.files.{path}': must be text", field=f"{name}.files"
            )
        files[path] = text.encode("utf-8")
    binary = tree.get("binary", {})
    if not isinstance(binary, dict):
        raise ImportFormatError(
            where, f"field '{name}.binary': expected {{path: base64}}", field=f"{name}.binary"
        )
    for path, encoded in binary.items():
        try:
            files[path] = base64.b64decode(encoded, validate=True)
        except (TypeError, ValueError, binascii.Error):
            raise ImportFormatError(
                where, f"field '{name}.binary.{path}': not base64", field=f"{name}.binary"
            ) from None
    return files


def _export_repository(version) -> dict:
    """A repository task version as a line: its workspace and hidden files as file trees, its
    suite's ids, command and timeout; ``prompt`` is the problem statement and
    ``reference_solution`` the reference patch, as stored."""
    suite, env, task = version.test_suite, version.environment, version.task
    test_suite = {
        "harness": suite.harness,
        "fail_to_pass": list(suite.fail_to_pass),
        "pass_to_pass": list(suite.pass_to_pass),
        "test_command": suite.test_command,
        "timeout_s": suite.timeout_s,
    }
    if suite.hidden_files is not None:
        test_suite["hidden_files"] = _tree_out(suite.hidden_files.files())
    return {
        "format": FORMAT,
        "task_id": task.task_id,
        "source": task.source,
        "tags": list(task.tags),
        "licence": task.licence,
        "metadata": dict(task.metadata),
        "prompt": version.prompt,
        "entry_point": "",
        "reference_solution": version.reference_solution,
        "workspace": _tree_out(version.workspace.files()),
        "environment": env.content(),
        "test_suite": test_suite,
        "content_hash": version.content_hash,
        "change_note": version.change_note,
        "author": version.author,
    }


def _repository_record(row: dict, suite: dict, where: str) -> dict:
    """A repository line as an import record holding a RepositoryTaskRecord."""

    def text(name: str, value, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise ImportFormatError(where, f"field '{name}' must be a string", field=name)
        return value

    record = RepositoryTaskRecord(
        task_id=row["task_id"],
        problem_statement=row["prompt"],
        files=_tree_in(row.get("workspace"), where=where, name="workspace"),
        reference_patch=row["reference_solution"],
        fail_to_pass=suite.get("fail_to_pass"),
        pass_to_pass=suite.get("pass_to_pass", []),
        environment=row["environment"],
        hidden_files=_tree_in(suite["hidden_files"], where=where, name="test_suite.hidden_files")
        if "hidden_files" in suite
        else {},
        test_command=text("test_suite.test_command", suite.get("test_command"), "pytest"),
        source=text("source", row.get("source"), "crucible"),
        licence=text("licence", row.get("licence")),
        tags=row.get("tags", []),
        metadata=row.get("metadata") if isinstance(row.get("metadata"), dict) else {},
    )
    return {
        "task_id": row["task_id"],
        "repository": record,
        "timeout_s": suite.get("timeout_s", 120.0),
        "change_note": row.get("change_note") if isinstance(row.get("change_note"), str) else None,
        "where": where,
    }


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
        if "environment" not in row:
            raise ImportFormatError(where, "missing field 'environment'", field="environment")
        if suite.get("harness") == "pytest-repo":
            yield _repository_record(row, suite, where)
            continue
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
