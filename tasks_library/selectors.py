"""Reads of the task library."""

from __future__ import annotations

import codecs
import difflib
import json

from django.db import connection
from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery

from sandboxes.repository.patches import make_patch
from sandboxes.suites import harness
from tasks_library.difficulty import bucket_filter
from tasks_library.environments import environment_queue_of
from tasks_library.models import Task, TaskSet, TaskVersion


class TaskSetNotFound(LookupError):
    """No task set has the given name."""


def task_set_get(*, name: str) -> TaskSet:
    """The task set called ``name``.

    Raises:
        TaskSetNotFound: with a message listing the task sets that exist.
    """
    try:
        return TaskSet.objects.get(name=name)
    except TaskSet.DoesNotExist:
        known = (
            ", ".join(TaskSet.objects.order_by("name").values_list("name", flat=True)) or "none yet"
        )
        raise TaskSetNotFound(
            f"task set {name!r} not found (known: {known}); create it with `python manage.py "
            "import_tasks humaneval`"
        ) from None


def task_set_versions(*, task_set: TaskSet) -> QuerySet[TaskVersion]:
    """The pinned versions of ``task_set`` in their set order, with suite and task loaded."""
    return (
        TaskVersion.objects.filter(tasksetmember__task_set=task_set)
        .select_related("task", "test_suite", "environment")
        .order_by("tasksetmember__position")
    )


def awaiting_validation(versions) -> list:
    """The versions no validation has judged yet: new ones (``pending``) and those whose last
    validation met a sandbox failure (``infra_error``, which says nothing of the task). The
    others keep their verdicts; ``validate_tasks`` validates them again on purpose."""
    waiting = (TaskVersion.VERDICT_PENDING, TaskVersion.VERDICT_INFRA_ERROR)
    return [v for v in versions if v.verdict in waiting]


def runtimes_of(versions) -> list[str]:
    """The sandbox queues (``python``, ``node``, ``python3.13``, or ``python@<key>`` with a queue
    per environment) that grading these versions needs: the harness's family, run by the
    environment's runtime."""
    return sorted(
        {
            environment_queue_of(v.environment, harness(v.test_suite.harness).runtime)
            for v in versions
        }
    )


def trainable(versions: QuerySet[TaskVersion]) -> QuerySet[TaskVersion]:
    """The versions training may sample: validated, and not quarantined (or overridden)."""
    return versions.filter(quarantined=False).exclude(
        verdict__in=[TaskVersion.VERDICT_PENDING, TaskVersion.VERDICT_INFRA_ERROR]
    )


def latest_versions() -> QuerySet[TaskVersion]:
    """The highest-numbered version of every task."""
    newest = (
        TaskVersion.objects.filter(task=OuterRef("task")).order_by("-number").values("number")[:1]
    )
    return TaskVersion.objects.filter(number=Subquery(newest))


def task_versions_filter(
    *,
    source: str = "",
    verdict: str = "",
    status: str = "",
    tag: str = "",
    difficulty: str = "",
    search: str = "",
    latest_only: bool = True,
) -> QuerySet[TaskVersion]:
    """Task versions for the curation list, newest task ids first, filtered.

    Args:
        status: ``quarantined``, ``trainable`` or ``pending``; ``difficulty``: a bucket
            name of :mod:`tasks_library.difficulty`; ``search``: a substring of the task
            id or the prompt, or a version hash prefix.
    """
    versions = latest_versions() if latest_only else TaskVersion.objects.all()
    if source:
        versions = versions.filter(task__source=source)
    if verdict:
        versions = versions.filter(verdict=verdict)
    if status == "quarantined":
        versions = versions.filter(quarantined=True)
    elif status == "trainable":
        versions = trainable(versions)
    elif status == "pending":
        versions = versions.filter(verdict=TaskVersion.VERDICT_PENDING)
    if tag:
        versions = (
            versions.filter(task__tags__contains=[tag])
            if _json_contains_supported()
            else versions.filter(task__tags__icontains=f'"{tag}"')
        )
    if difficulty:
        versions = versions.filter(bucket_filter(difficulty))
    if search:
        versions = versions.filter(
            Q(task__task_id__icontains=search)
            | Q(prompt__icontains=search)
            | Q(content_hash__startswith=search.lower())
        )
    return versions.select_related("task", "test_suite").order_by(
        "task__sort_key", "task__task_id", "number"
    )


def _json_contains_supported() -> bool:
    return connection.features.supports_json_field_contains


def _repository_text_fields(version: TaskVersion) -> dict[str, str]:
    """A repository version's content that reads as text: the id lists one id a line; its trees
    are compared by :func:`_tree_changes`."""
    suite, env = version.test_suite, version.environment
    return {
        "problem_statement": version.prompt,
        "reference_patch": version.reference_solution,
        "test_suite.fail_to_pass": "".join(f"{i}\n" for i in suite.fail_to_pass),
        "test_suite.pass_to_pass": "".join(f"{i}\n" for i in suite.pass_to_pass),
        "test_suite.test_command": suite.test_command,
        "test_suite.timeout_s": str(suite.timeout_s),
        "environment": json.dumps(env.content(), indent=1, sort_keys=True),
    }


def _hidden_files(version: TaskVersion) -> dict[str, bytes]:
    hidden = version.test_suite.hidden_files
    return hidden.files() if hidden else {}


def _tree_changes(old: TaskVersion, new: TaskVersion) -> list[dict]:
    """Two repository versions' trees compared as git-style patches of the files that changed
    (the workspace, then the hidden test files); a tree both share (one row) is not unpacked."""
    changes = []
    sizes = [
        tree.size_bytes
        for tree in (old.workspace, new.workspace, old.test_suite.hidden_files)
        if tree is not None
    ]
    if new.test_suite.hidden_files is not None:
        sizes.append(new.test_suite.hidden_files.size_bytes)
    if sum(sizes) > DIFF_TREES_MAX_BYTES and (
        old.workspace_id != new.workspace_id
        or old.test_suite.hidden_files_id != new.test_suite.hidden_files_id
    ):
        note = (
            f"the trees hold {sum(sizes)} bytes together, over the {DIFF_TREES_MAX_BYTES} "
            "bytes a page diffs; compare them with export_tasks\n"
        )
        return [{"field": "workspace", "diff": note}]
    if old.workspace_id != new.workspace_id:
        changes.append(
            {"field": "workspace", "diff": make_patch(old.workspace.files(), new.workspace.files())}
        )
    if old.test_suite.hidden_files_id != new.test_suite.hidden_files_id:
        changes.append(
            {
                "field": "test_suite.hidden_files",
                "diff": make_patch(_hidden_files(old), _hidden_files(new)),
            }
        )
    return changes


def _text_fields(version: TaskVersion) -> dict[str, str]:
    suite, env = version.test_suite, version.environment
    return {
        "prompt": version.prompt,
        "entry_point": version.entry_point,
        "reference_solution": version.reference_solution,
        "files": json.dumps(version.files, indent=1, sort_keys=True) if version.files else "",
        "test_suite.harness": suite.harness,
        "test_suite.visible_tests": suite.visible_tests,
        "test_suite.hidden_tests": suite.hidden_tests,
        "test_suite.setup_code": suite.setup_code,
        "test_suite.timeout_s": str(suite.timeout_s),
        "environment": json.dumps(env.content(), indent=1, sort_keys=True),
    }


def task_versions_diff(*, old: TaskVersion, new: TaskVersion) -> list[dict]:
    """The fields that differ between two versions, each as a unified diff. Between two
    repository versions: the problem statement, reference patch, id lists, command, timeout and
    environment as text, then the workspace and the hidden test files as git-style patches of
    the files that changed (``workspace``, ``test_suite.hidden_files``).

    Returns:
        ``[{"field": "reference_solution", "diff": "--- v1\\n+++ v2\\n@@ ..."}, ...]`` in a
        fixed field order; empty when the contents are identical.
    """
    if old.is_repository and new.is_repository:
        before, after = _repository_text_fields(old), _repository_text_fields(new)
        trees = _tree_changes(old, new)
    else:
        before, after = _text_fields(old), _text_fields(new)
        trees = []
    changes = []
    for name in before:
        if before[name] != after[name]:
            lines = difflib.unified_diff(
                before[name].splitlines(keepends=True),
                after[name].splitlines(keepends=True),
                fromfile=f"v{old.number} {name}",
                tofile=f"v{new.number} {name}",
            )
            changes.append(
                {
                    "field": name,
                    "diff": "".join(line if line.endswith("\n") else line + "\n" for line in lines),
                }
            )
    return changes + trees


# Columns a list of versions never shows: the heavy text and the validation evidence.
SUMMARY_DEFERRED = ("report", "prompt", "reference_solution", "files", "verdict_reasons")


def task_sources() -> QuerySet:
    """The distinct ``source`` of tasks, sorted (for filters)."""
    return Task.objects.order_by("source").values_list("source", flat=True).distinct()


def task_version_summaries(*, task: Task) -> QuerySet[TaskVersion]:
    """A task's versions, oldest first, without their heavy text columns."""
    return task.versions.select_related("task").defer(*SUMMARY_DEFERRED).order_by("number")


def task_sets_with_sizes() -> QuerySet[TaskSet]:
    """Task sets by name, each annotated with ``size`` (pinned versions) and
    ``latest_version`` (its newest task set version number, or None)."""
    return TaskSet.objects.annotate(
        size=Count("members", distinct=True), latest_version=Max("versions__number")
    ).order_by("name")


# --- repository tasks: the page's file browser and per-id results ------------------------------

FILE_VIEW_BYTES = 256 * 1024  # a file's view shows this much; the rest is cut, and said so
# Trees of two versions are diffed on a page only up to this size together (else the page says
# so): a diff reads both trees whole.
DIFF_TREES_MAX_BYTES = 64 * 1024**2
# Stored trees' blobs stay in the database until a file is read (pages and API; grading and export
# load them whole).
TREE_BLOBS = ("workspace__blob", "test_suite__hidden_files__blob")


def task_versions_light() -> QuerySet[TaskVersion]:
    """Task versions with their task, suite, environment, parent and stored trees, the trees'
    blobs deferred (a page or the API reads a tree's header and one file at a time)."""
    return TaskVersion.objects.select_related(
        "task", "test_suite", "environment", "parent", "workspace", "test_suite__hidden_files"
    ).defer(*TREE_BLOBS)


class WorkspacePathNotFound(LookupError):
    """No file or directory at the path asked for in a workspace."""


def workspace_browse(*, workspace, path: str) -> dict:
    """One directory's entries, or one file's text, of a repository workspace, read from the
    stored blob's header and that one file's bytes (never the whole tree: a workspace may hold
    hundreds of megabytes).

    Args:
        workspace: a :class:`~tasks_library.models.RepositoryWorkspace` (loaded without its
            blob: :func:`task_versions_light`).
        path: ``""`` (the root), a directory (``src/pkg``) or a file path.

    Returns:
        ``{"kind": "dir", "path", "crumbs": [(name, path)], "dirs": [(name, path, files
        under it)], "files": [(name, path, size)]}``, or ``{"kind": "file", "path", "crumbs",
        "size", "text": str or None (not UTF-8), "truncated": bool}``: at most
        :data:`FILE_VIEW_BYTES` of the file are read. File content is returned as the workspace
        holds it: the page escapes it.

    Raises:
        WorkspacePathNotFound: nothing at ``path``.
    """
    sizes = {e.path: e.size for e in workspace.index() if e.kind == "file"}
    path = path.strip("/")
    parts = path.split("/") if path else []
    crumbs = [(part, "/".join(parts[: k + 1])) for k, part in enumerate(parts)]
    if path in sizes:
        content, size = workspace.read(path, max_bytes=FILE_VIEW_BYTES)
        try:  # a cut in the middle of a character is not a decoding error
            text = codecs.getincrementaldecoder("utf-8")().decode(
                content, final=size == len(content)
            )
        except UnicodeDecodeError:
            text = None
        return {
            "kind": "file",
            "path": path,
            "crumbs": crumbs,
            "size": size,
            "text": text,
            "truncated": text is not None and size > len(content),
        }
    prefix = f"{path}/" if path else ""
    dirs: dict[str, int] = {}
    entries = []
    for name, size in sizes.items():
        if not name.startswith(prefix):
            continue
        head, sep, _rest = name[len(prefix) :].partition("/")
        if sep:
            dirs[head] = dirs.get(head, 0) + 1
        else:
            entries.append((head, name, size))
    if not dirs and not entries:
        raise WorkspacePathNotFound(f"no file or directory {path!r} in this workspace")
    return {
        "kind": "dir",
        "path": path,
        "crumbs": crumbs,
        "dirs": [(d, prefix + d, n) for d, n in sorted(dirs.items())],
        "files": sorted(entries),
    }


def repository_test_results(*, version: TaskVersion) -> list[dict]:
    """The FAIL_TO_PASS then PASS_TO_PASS ids of a repository version with their results in its
    last validation: ``[{"id", "list": "FAIL_TO_PASS" | "PASS_TO_PASS", "expected_without",
    "with_patch", "without_patch"}]``, a result being a pytest outcome (``passed``, ``failed``,
    ``error``, ``skipped``, ``missing``) or ``""`` when not validated."""
    suite, report = version.test_suite, version.report or {}
    with_patch = (report.get("reference") or {}).get("per_id") or {}
    without = (report.get("empty_patch") or {}).get("per_id") or {}
    rows = []
    for name, ids, expected in (
        ("FAIL_TO_PASS", suite.fail_to_pass, "failed"),
        ("PASS_TO_PASS", suite.pass_to_pass, "passed"),
    ):
        rows += [
            {
                "id": test_id,
                "list": name,
                "expected_without": expected,
                "with_patch": with_patch.get(test_id, ""),
                "without_patch": without.get(test_id, ""),
            }
            for test_id in ids
        ]
    return rows
