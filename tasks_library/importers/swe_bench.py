"""SWE-bench-shaped JSONL: one repository task a row, the repository read from a local source.

A row (SWE-bench, SWE-Gym and their kin publish this shape)::

    {"instance_id": "calc__calc-12", "repo": "acme/calc", "base_commit": "3f1c...",
     "patch": "diff --git a/calc/ops.py b/calc/ops.py ...",        # the reference fix
     "test_patch": "diff --git a/tests/test_ops.py ...",          # tests added at grading
     "problem_statement": "clamp() ignores its upper bound ...",
     "FAIL_TO_PASS": "[\\"tests/test_ops.py::test_clamp_above\\"]",   # a JSON string or a list
     "PASS_TO_PASS": ["tests/test_ops.py::test_add"],
     "environment_setup_commit": "...", "version": "1.2"}           # optional, kept as metadata

Optional Crucible fields: ``environment`` (``{"name", "runtime", "packages"}``; default
:data:`~tasks_library.repositories.DEFAULT_ENVIRONMENT`, Python 3.11 with pytest pinned: a
project with dependencies names its own), ``test_command`` (default ``pytest``), ``timeout_s``
(default 120), ``licence`` (or ``license``), ``tags``.

The repository at ``base_commit`` comes from ``--repo [OWNER/NAME=]PATH``
(:mod:`tasks_library.importers.repository_source`); the workspace is that tree, ``test_patch``
applied to it gives the hidden test files (the files it adds or changes), ``patch`` is the
reference patch. Every error names the row (``FILE:LINE``) and the row's field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from sandboxes.repository.patches import PatchError, apply_patch, patched_paths
from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import read_jsonl
from tasks_library.importers.repository_source import RepositorySourceError, tree_at
from tasks_library.repositories import (
    DEFAULT_ENVIRONMENT,
    DEFAULT_TEST_COMMAND,
    DEFAULT_TIMEOUT_S,
    RepositoryTaskRecord,
    record_check,
)

REQUIRED_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
)
SOURCE = "swe-bench"
# The record's field -> the row's, so that an error names the field the user wrote.
ROW_FIELDS = {
    "fail_to_pass": "FAIL_TO_PASS",
    "pass_to_pass": "PASS_TO_PASS",
    "reference_patch": "patch",
    "hidden_files": "test_patch",
    "files": "repo",
}


def parse_repo_options(values: list[str]) -> dict[str | None, Path]:
    """``--repo`` values as ``{owner/name or None: path}``: ``acme/calc=/src/calc`` serves rows
    whose ``repo`` is ``acme/calc``; a bare path serves every other row.

    Raises:
        ImportFormatError: two bare paths, or one name given twice.
    """
    repos: dict[str | None, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        key = name.strip() if sep else None
        target = Path(path if sep else value).expanduser()
        if key in repos:
            raise ImportFormatError(
                "--repo",
                f"{'repository ' + repr(key) if key else 'a default repository'} is given twice",
                field="repo",
            )
        repos[key] = target
    return repos


def test_ids(row: dict, name: str, where: str) -> list[str]:
    """``row[name]`` as a list of test ids: a list of strings, or a JSON string of one (as the
    published datasets have it).

    Raises:
        ImportFormatError: (``name``) missing, not JSON, or not a list of strings.
    """
    if name not in row:
        raise ImportFormatError(where, f"missing field {name!r}", field=name)
    value = row[name]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                where,
                f"field {name!r}: a string that is not a JSON list of test ids ({exc.msg})",
                field=name,
            ) from None
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise ImportFormatError(
            where,
            f"field {name!r}: expected a list of test ids (or a JSON string of one), got "
            f"{type(value).__name__}" + (" of non-strings" if isinstance(value, list) else ""),
            field=name,
        )
    return value


def _hidden_files(files: dict[str, bytes], test_patch: str, where: str) -> dict[str, bytes]:
    """The files ``test_patch`` adds or changes, as they are once it is applied."""
    if not test_patch.strip():
        return {}
    try:
        patched = apply_patch(files, test_patch)
        paths = patched_paths(test_patch)
    except PatchError as exc:
        raise ImportFormatError(where, f"field 'test_patch': {exc}", field="test_patch") from None
    return {p: patched[p] for p in paths if p in patched and patched[p] != files.get(p)}


def read_swe_bench(
    path: Path, repos: Mapping[str | None, Path]
) -> Iterator[tuple[str, RepositoryTaskRecord, float]]:
    """Yield ``(where, record, timeout_s)`` for each row of a SWE-bench-shaped JSONL(.gz) file,
    checked as the import will check it (patches apply, ids name existing test files).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ImportFormatError: a row is malformed or its repository cannot be read at its
            ``base_commit`` (row and field named).
    """
    trees: dict[tuple[Path, str], dict[str, bytes]] = {}
    for where, row in read_jsonl(path, REQUIRED_FIELDS, id_field="instance_id"):
        fail_to_pass = test_ids(row, "FAIL_TO_PASS", where)
        pass_to_pass = test_ids(row, "PASS_TO_PASS", where)
        source = repos.get(row["repo"], repos.get(None))
        if source is None:
            raise ImportFormatError(
                where,
                f"field 'repo': no local repository for {row['repo']!r}; pass --repo "
                f"{row['repo']}=PATH (a git repository or an archive of it)",
                field="repo",
            )
        key = (source, row["base_commit"])
        if key not in trees:
            try:
                trees[key] = tree_at(source, row["base_commit"])
            except RepositorySourceError as exc:
                field = "repo" if "does not exist" in str(exc) else "base_commit"
                raise ImportFormatError(where, f"field '{field}': {exc}", field=field) from None
        files = trees[key]
        licence = row.get("licence", row.get("license", ""))
        record = RepositoryTaskRecord(
            task_id=row["instance_id"],
            problem_statement=row["problem_statement"],
            files=files,
            reference_patch=row["patch"],
            fail_to_pass=fail_to_pass,
            pass_to_pass=pass_to_pass,
            environment=row.get("environment") or dict(DEFAULT_ENVIRONMENT),
            hidden_files=_hidden_files(files, row["test_patch"], where),
            test_command=row.get("test_command") or DEFAULT_TEST_COMMAND,
            source=SOURCE,
            licence=licence if isinstance(licence, str) else "",
            tags=row.get("tags") or [],
            metadata={
                key: row[key]
                for key in (
                    "repo",
                    "base_commit",
                    "environment_setup_commit",
                    "version",
                    "created_at",
                )
                if isinstance(row.get(key), str)
            },
        )
        timeout_s = row.get("timeout_s", DEFAULT_TIMEOUT_S)
        try:
            record_check(record, where=where, timeout_s=timeout_s)
        except ImportFormatError as exc:
            field = exc.field or ""
            head, dot, rest = field.partition(".")
            named = ROW_FIELDS.get(head, head) + dot + rest
            detail = exc.detail.replace(f"field '{field}'", f"field '{named}'", 1)
            raise ImportFormatError(where, detail, field=named or None) from None
        yield where, record, timeout_s
