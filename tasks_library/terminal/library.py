"""Terminal tasks in the library: stored as task versions, read back, exported.

A terminal task version (``TaskVersion.kind == "terminal"``) keeps its whole Harbor task
directory, byte for byte, as its ``workspace`` (a :class:`~tasks_library.models.
RepositoryWorkspace`, stored once per tree); ``prompt`` is ``instruction.md``,
``reference_solution`` is ``solution/solve.sh``. Its suite has harness ``terminal``, the
verifier's timeout and ``tests/`` as hidden files; its environment is the Debian root
(``python3.13``) with the Dockerfile's Debian packages and pinned Python packages. Exported, the
directory is the same bytes (:func:`terminal_task_of` then ``layout.write_harbor``), so a round
trip keeps :meth:`TerminalTask.content_hash`.

Every terminal task runs on the Debian root: a ``FROM python:3.X`` base maps there too (the
sandbox's other runtimes bind the host's own system, which a task's state may not touch); the
base is kept in the task's metadata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from django.db import transaction

from core.errors import InputError
from sandboxes.sessions.workspace import Workspace
from tasks_library.environments import environment_create
from tasks_library.hashing import content_hash
from tasks_library.models import Task, TaskVersion, TestSuiteVersion
from tasks_library.repositories import workspace_store
from tasks_library.services import (
    ImportFormatError,
    ImportReport,
    command_line_author,
    task_kind_check,
    task_set_pin,
    task_version_get_or_create,
)
from tasks_library.terminal.dockerfile import DEBIAN_RUNTIME
from tasks_library.terminal.layout import TerminalTask, TerminalTaskError, read_task
from tasks_library.terminal.state import TerminalSpec, terminal_spec

HARNESS = "terminal"
TEST_COMMAND = "bash /tests/test.sh"
SOURCE = "terminal"


def _environment(task: TerminalTask, spec: TerminalSpec, *, author: str):
    """The environment version of ``task``: one per package set (the name says which), so
    tasks that ask for the same packages share a row and a build."""
    packages = sorted(spec.python_packages)
    debian = sorted(spec.debian_packages)
    digest = hashlib.sha256(repr((packages, debian)).encode()).hexdigest()[:12]
    try:
        return environment_create(
            name=f"terminal-{digest}",
            runtime=DEBIAN_RUNTIME,
            packages=packages,
            debian_packages=debian,
            image=task.recipe.base,
            author=author,
        )
    except InputError as exc:  # the environment's checks: the Dockerfile's packages
        raise TerminalTaskError(
            task.directory_name,
            f"environment/Dockerfile: {exc}",
            field="environment/Dockerfile",
        ) from None


def _suite(tests: dict[str, bytes], timeout_s: float, *, author: str) -> TestSuiteVersion:
    hidden = workspace_store(workspace=Workspace.from_files(tests)) if tests else None
    content = {
        "harness": HARNESS,
        "visible_tests": "",
        "hidden_tests": "",
        "visible_test_ids": [],
        "hidden_test_ids": ["verifier"],
        "timeout_s": timeout_s,
        "test_command": TEST_COMMAND,
    }
    hashed = dict(content, hidden_files=hidden.digest if hidden else None)
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash=content_hash(hashed),
        defaults=dict(content, hidden_files=hidden, author=author),
    )
    return suite


def terminal_version_get_or_create(
    task: TerminalTask, *, author: str, change_note: str, licence: str = ""
) -> tuple[TaskVersion, bool]:
    """The version of ``task`` (by its ``[task] name``) with its content: created when new
    (``pending`` validation), the task on first sight.

    Raises:
        TerminalTaskError: the task cannot run as written (its working directory, a copy, its
            services or environment: the message names the file).
        ImportFormatError: the name belongs to a task of another kind.
    """
    spec = terminal_spec(task)
    if "test.sh" not in spec.tests:
        raise TerminalTaskError(task.directory_name, "no tests/test.sh", field="tests/test.sh")
    metadata = task.config.get("metadata", {})
    tags = metadata.get("tags", []) if isinstance(metadata, dict) else []
    tags = [t for t in tags if isinstance(t, str)][:20]
    category = metadata.get("category") if isinstance(metadata, dict) else None
    env = _environment(task, spec, author=author)
    suite = _suite(spec.tests, spec.verifier_timeout_s, author=author)
    described = {
        "layout": "harbor",
        "base": task.recipe.base,
        "directory": task.directory_name,
        "content_hash": task.content_hash(),
    }
    record, _ = Task.objects.get_or_create(
        task_id=task.name,
        defaults={
            "source": SOURCE,
            "tags": [*dict.fromkeys([*([category] if isinstance(category, str) else []), *tags])],
            "licence": licence,
            "metadata": described,
        },
    )
    task_kind_check(record, kind=TaskVersion.KIND_TERMINAL, where=task.directory_name)
    changed = []
    if licence and record.licence != licence:
        record.licence = licence
        changed.append("licence")
    if record.metadata != described:
        record.metadata = described
        changed.append("metadata")
    if changed:
        record.save(update_fields=changed)
    return task_version_get_or_create(
        task=record,
        author=author,
        change_note=change_note,
        prompt=task.instruction,
        entry_point="",
        reference_solution=spec.solution.get("solve.sh", b"").decode("utf-8", "replace"),
        files={},
        workspace=workspace_store(workspace=Workspace.from_files(task.files)),
        environment=env,
        test_suite=suite,
        kind=TaskVersion.KIND_TERMINAL,
    )


def task_directories(root: Path) -> list[Path]:
    """The task directories under ``root``: ``root`` itself when it is one (``task.toml`` or
    ``task.yaml``), else its subdirectories that are, sorted; one level deeper too (a set of
    sets)."""

    def is_task(path: Path) -> bool:
        return (path / "task.toml").is_file() or (path / "task.yaml").is_file()

    if is_task(root):
        return [root]
    found = []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        if is_task(child):
            found.append(child)
        else:
            found += [
                g
                for g in sorted(child.iterdir())
                if g.is_dir() and not g.is_symlink() and is_task(g)
            ]
    return found


SHIPPED = Path(__file__).resolve().parent.parent / "data" / "terminal"


def terminal_sets() -> dict[str, Path]:
    """The task sets shipped in ``tasks_library/data/terminal``: ``{name: directory}``, and
    ``all`` (every set)."""
    sets = (
        {p.name: p for p in sorted(SHIPPED.iterdir()) if p.is_dir() and not p.name.startswith(".")}
        if SHIPPED.is_dir()
        else {}
    )
    return {**sets, "all": SHIPPED} if sets else {}


def licence_of(directory: Path) -> str:
    """The first line of a ``LICENSE`` file in the task's directory or the set's above it."""
    for place in (directory, directory.parent):
        path = place / "LICENSE"
        if path.is_file() and not path.is_symlink():
            first = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            return first[0][:200] if first else ""
    return ""


@transaction.atomic
def terminal_tasks_import(
    directories: Iterable[Path],
    *,
    task_set_name: str,
    author: str = "",
    change_note: str = "",
) -> ImportReport:
    """Import terminal task directories (Harbor's layout or Terminal-Bench's) and pin them as
    the task set ``task_set_name``. All or nothing; idempotent (a directory whose content a
    version already has creates nothing).

    Raises:
        ImportFormatError: a directory is malformed or cannot run (the message names the
            directory and the file), two directories name the same task, or none is given.
    """
    author = author or command_line_author()
    note = change_note or f"imported terminal tasks into {task_set_name}"
    report = ImportReport(task_set=task_set_name)
    pinned: list[TaskVersion] = []
    seen: dict[str, str] = {}
    for directory in directories:
        try:
            task = read_task(directory)
            if task.name in seen:
                raise ImportFormatError(
                    str(directory),
                    f"task name {task.name!r} is also {seen[task.name]}'s",
                    field="task.toml",
                )
            seen[task.name] = str(directory)
            version, created = terminal_version_get_or_create(
                task, author=author, change_note=note, licence=licence_of(directory)
            )
        except TerminalTaskError as exc:  # its message names the directory already
            raise ImportFormatError(None, str(exc), field=exc.field) from None
        report.new_versions += created
        report.unchanged += not created
        report.task_ids.append(task.name)
        pinned.append(version)
    if not pinned:
        raise ImportFormatError(None, "no terminal task directory to import")
    report.tasks = len(pinned)
    task_set_pin(
        name=task_set_name,
        versions=pinned,
        author=author,
        change_note=f"imported {len(pinned)} terminal tasks",
    )
    return report


def terminal_task_of(version: TaskVersion) -> TerminalTask:
    """The Harbor task directory a terminal version keeps (its exact files).

    Raises:
        ValueError: ``version`` is not a terminal task.
    """
    if not version.is_terminal or version.workspace is None:
        raise ValueError(f"task version {version} is not a terminal task")
    name = version.task.metadata.get("directory") or version.task.task_id.rsplit("/", 1)[-1]
    return TerminalTask(files=version.workspace.files(), directory_name=name)
