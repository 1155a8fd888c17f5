"""Repository tasks (SWE-bench's shape): a buggy repository workspace, a problem statement,
FAIL_TO_PASS and PASS_TO_PASS test ids, hidden test files and the reference patch.

:class:`RepositoryTaskRecord` is what every source of repository tasks produces (the
SWE-bench JSONL importer, the bug generator) before it is stored as a task version;
:func:`repository_tasks_import` stores records. How a stored version maps onto the models:

- the buggy tree is a :class:`~tasks_library.models.RepositoryWorkspace` (stored once per
  distinct tree, keyed by its digest) on ``TaskVersion.workspace``;
- the problem statement is ``TaskVersion.prompt``, the reference patch
  ``TaskVersion.reference_solution``, ``entry_point`` is empty;
- the test suite's harness is ``pytest-repo``: ``fail_to_pass``, ``pass_to_pass``,
  ``hidden_files`` (a workspace row too), ``test_command`` and ``timeout_s``;
- the environment is an :class:`~tasks_library.models.EnvironmentVersion` whose packages pin
  pytest (:data:`DEFAULT_ENVIRONMENT` when a source names none).

The content hash covers the workspace's and the hidden files' digests, so two versions that
share a tree share its row, and a version's hash is the same on every database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db import transaction

from core.errors import InputError
from core.names import name_problem, printable
from sandboxes.repository.grading import RepositoryTests, pytest_options
from sandboxes.repository.patches import PatchError, apply_patch
from sandboxes.repository.paths import is_test_path
from sandboxes.sessions.workspace import Workspace
from tasks_library.hashing import content_hash
from tasks_library.importers import ImportFormatError
from tasks_library.models import (
    EnvironmentVersion,
    RepositoryWorkspace,
    Task,
    TaskVersion,
    TestSuiteVersion,
)
from tasks_library.services import (
    ImportReport,
    command_line_author,
    environment_check,
    environment_get_or_create,
    task_kind_check,
    task_set_pin,
    task_version_get_or_create,
    timeout_check,
)

DEFAULT_TEST_COMMAND = "pytest"
HARNESS = "pytest-repo"
# The environment of a repository task whose source names none: the Python Crucible's sandboxes
# run (3.11) with pytest pinned. A project that needs more packages names its own environment
# (a SWE-bench row's "environment" object, the generator's record).
DEFAULT_ENVIRONMENT = {
    "name": "python-pytest",
    "runtime": "python3.11",
    "packages": ["pytest==8.3.4"],
    "image": "",
}
DEFAULT_TIMEOUT_S = 120.0


@dataclass
class RepositoryTaskRecord:
    """One repository task before import.

    Attributes:
        task_id: the task's id (``repo-bugs/toolz-1.0.0/0007``).
        problem_statement: what the user sees: the misbehaviour, as an issue describes it.
        files: the buggy workspace, ``{path: content}``, without ``.git``.
        reference_patch: the fix, a git-style unified diff (``sandboxes.repository.patches``).
        fail_to_pass: pytest node ids that fail on ``files`` and pass with the patch.
        pass_to_pass: pytest node ids that pass on both.
        hidden_files: test files added only at grading (``{path: content}``).
        test_command: how the suite runs (``pytest`` and its arguments).
        environment: the environment spec: ``{"name", "runtime", "packages"}``.
        source: where it came from (``repo-bugs``, ``swe-bench``).
        licence: the project's licence (SPDX id or the licence's name).
        tags: free labels; metadata: provenance (package, version, mutation, file, function).
    """

    task_id: str
    problem_statement: str
    files: dict[str, bytes]
    reference_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    environment: dict
    hidden_files: dict[str, bytes] = field(default_factory=dict)
    test_command: str = DEFAULT_TEST_COMMAND
    source: str = "repo-bugs"
    licence: str = ""
    tags: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


# --- checks: every one raises ImportFormatError naming the place and the field -----------------


def _tree(files, *, where: str, name: str) -> Workspace:
    """``files`` (``{path: bytes or text}``) as a workspace; refused when not a mapping of
    workspace paths to content."""
    if not isinstance(files, Mapping):
        raise ImportFormatError(where, f"field '{name}': expected {{path: content}}", field=name)
    for path in files:
        problem = name_problem(path) if isinstance(path, str) else None
        if problem:
            raise ImportFormatError(
                where,
                f"field '{name}': file name {printable(path)} {problem}; rename it",
                field=name,
            )
    try:
        return Workspace.from_files(files)
    except ValueError as exc:
        raise ImportFormatError(where, f"field '{name}': {exc}", field=name) from None


def _test_ids(ids, *, where: str, name: str) -> list[str]:
    """A list of pytest node ids, each a printable UTF-8 id whose file part names no option.

    Raises:
        ImportFormatError: not a list of non-empty strings, a repeated id, an id with a control
            character or invalid UTF-8, or a file part with a component starting with ``-``
            (pytest would read it as an option).
    """
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) and i for i in ids):
        raise ImportFormatError(
            where,
            f"field '{name}': expected a list of pytest node ids (strings), got "
            f"{type(ids).__name__}",
            field=name,
        )
    for node_id in ids:
        problem = name_problem(node_id)
        if problem:
            raise ImportFormatError(
                where, f"field '{name}': test id {printable(node_id)} {problem}", field=name
            )
        if any(part.startswith("-") for part in test_file_of(node_id).split("/")):
            raise ImportFormatError(
                where,
                f"field '{name}': test id {node_id!r} names a file starting with '-', which "
                "pytest would read as an option; rename the file",
                field=name,
            )
    duplicate = next((i for k, i in enumerate(ids) if i in ids[:k]), None)
    if duplicate is not None:
        raise ImportFormatError(
            where, f"field '{name}': test id {duplicate!r} appears twice", field=name
        )
    return list(ids)


def test_file_of(node_id: str) -> str:
    """The file part of a pytest node id (``tests/test_a.py::TestX::test_y[1]`` ->
    ``tests/test_a.py``)."""
    return node_id.split("::", 1)[0]


def _check_ids_exist(ids: list[str], paths: set[str], *, where: str, name: str) -> None:
    """Every id's file is in the workspace or among the hidden files. Whether pytest collects
    the id itself is the validation pipeline's check (it runs the suite)."""
    for node_id in ids:
        if test_file_of(node_id) not in paths:
            raise ImportFormatError(
                where,
                f"field '{name}': test id {node_id!r} names the file "
                f"{test_file_of(node_id)!r}, which is neither in the repository nor among the "
                "hidden test files",
                field=name,
            )


def test_command_check(command, *, where: str) -> str:
    """``command`` (stripped) if the grading can run it: ``pytest`` (or ``python -m pytest``)
    then options and paths, none of those the grading sets itself
    (:func:`sandboxes.repository.grading.pytest_options`).

    Raises:
        ImportFormatError: (``test_command``) not text, not shell words, not pytest, or an
            option the grading owns.
    """
    if not isinstance(command, str) or not command.strip():
        raise ImportFormatError(
            where, "field 'test_command': expected text such as 'pytest -q'", field="test_command"
        )
    try:
        pytest_options(command)
    except ValueError as exc:
        raise ImportFormatError(
            where, f"field 'test_command': {exc}", field="test_command"
        ) from None
    return command.strip()


def _environment(content, *, where: str) -> dict:
    canonical = environment_check(content, where=where, runtime="python")
    if not any(p.split("==")[0].strip().lower() == "pytest" for p in canonical["packages"]):
        raise ImportFormatError(
            where,
            "field 'environment.packages': a repository task's suite runs pytest, so its "
            "environment must pin it (e.g. 'pytest==8.3.4')",
            field="environment.packages",
        )
    return canonical


@dataclass
class CheckedRecord:
    """A record's content after its checks: what a version is made of."""

    problem_statement: str
    workspace: Workspace
    reference_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    hidden: Workspace | None
    test_command: str
    environment: dict
    timeout_s: float


def record_check(
    record: RepositoryTaskRecord, *, where: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> CheckedRecord:
    """Check a record without running anything: the patch applies, the ids name test files
    that exist, the environment pins pytest.

    Raises:
        ImportFormatError: naming ``where`` and the field (``files``, ``reference_patch``,
            ``fail_to_pass``, ``pass_to_pass``, ``hidden_files``, ``test_command``,
            ``environment...``, ``problem_statement``, ``timeout_s``).
    """
    if not isinstance(record.problem_statement, str) or not record.problem_statement.strip():
        raise ImportFormatError(
            where,
            "field 'problem_statement': empty; describe the misbehaviour the fix resolves",
            field="problem_statement",
        )
    workspace = _tree(record.files, where=where, name="files")
    if not workspace.entries:
        raise ImportFormatError(where, "field 'files': the repository has no file", field="files")
    hidden = _tree(record.hidden_files or {}, where=where, name="hidden_files")
    patch = record.reference_patch
    if not isinstance(patch, str) or not patch.strip():
        raise ImportFormatError(
            where,
            "field 'reference_patch': empty; a repository task needs the fix as a unified diff",
            field="reference_patch",
        )
    try:
        fixed = apply_patch(workspace.files(), patch)
    except PatchError as exc:
        raise ImportFormatError(
            where, f"field 'reference_patch': {exc}", field="reference_patch"
        ) from None
    if fixed == workspace.files():
        raise ImportFormatError(
            where, "field 'reference_patch': changes nothing", field="reference_patch"
        )
    fail_to_pass = _test_ids(record.fail_to_pass, where=where, name="fail_to_pass")
    pass_to_pass = _test_ids(record.pass_to_pass, where=where, name="pass_to_pass")
    if not fail_to_pass:
        raise ImportFormatError(
            where,
            "field 'fail_to_pass': empty; name the tests the fix makes pass",
            field="fail_to_pass",
        )
    both = sorted(set(fail_to_pass) & set(pass_to_pass))
    if both:
        raise ImportFormatError(
            where,
            f"field 'pass_to_pass': {both[0]!r} is in FAIL_TO_PASS too",
            field="pass_to_pass",
        )
    paths = {e.path for e in workspace.entries} | {e.path for e in hidden.entries}
    _check_ids_exist(fail_to_pass, paths, where=where, name="fail_to_pass")
    _check_ids_exist(pass_to_pass, paths, where=where, name="pass_to_pass")
    return CheckedRecord(
        problem_statement=record.problem_statement,
        workspace=workspace,
        reference_patch=patch if patch.endswith("\n") else patch + "\n",
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        hidden=hidden if hidden.entries else None,
        test_command=test_command_check(record.test_command, where=where),
        environment=_environment(record.environment, where=where),
        timeout_s=timeout_check(timeout_s, where=where),
    )


# --- writes ------------------------------------------------------------------------------------


def workspace_store(*, workspace: Workspace) -> RepositoryWorkspace:
    """The row holding ``workspace``, created when its digest is new (content-addressed: a tree
    is stored once however many versions point at it)."""
    row, _ = RepositoryWorkspace.objects.get_or_create(
        digest=workspace.digest,
        defaults={
            "blob": workspace.blob,
            "file_count": sum(e.kind == "file" for e in workspace.entries),
            "size_bytes": workspace.size_bytes,
        },
    )
    return row


def repository_suite_get_or_create(
    *,
    checked: CheckedRecord,
    author: str,
    change_note: str,
    parent: TestSuiteVersion | None = None,
) -> TestSuiteVersion:
    """The ``pytest-repo`` suite version of ``checked``'s ids, hidden files, command, timeout."""
    hidden = workspace_store(workspace=checked.hidden) if checked.hidden else None
    content = {
        "harness": HARNESS,
        "visible_tests": "",
        "hidden_tests": "",
        "visible_test_ids": [],
        "hidden_test_ids": [*checked.fail_to_pass, *checked.pass_to_pass],
        "timeout_s": checked.timeout_s,
        "fail_to_pass": checked.fail_to_pass,
        "pass_to_pass": checked.pass_to_pass,
        "test_command": checked.test_command,
    }
    hashed = dict(content)
    if hidden is not None:
        hashed["hidden_files"] = hidden.digest
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash=content_hash(hashed),
        defaults=dict(
            content, hidden_files=hidden, author=author, change_note=change_note, parent=parent
        ),
    )
    return suite


def repository_version_get_or_create(
    *,
    record: RepositoryTaskRecord,
    where: str,
    author: str,
    change_note: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    parent: TaskVersion | None = None,
) -> tuple[TaskVersion, bool]:
    """The version of ``record``'s task with its content: created (numbered after the latest,
    ``pending`` validation) when new. The task is created on first sight; its tags gain the
    record's, its licence and metadata are the record's when given.

    Raises:
        ImportFormatError: a check of :func:`record_check` fails, or ``task_id`` is empty.
    """
    if not isinstance(record.task_id, str) or not record.task_id.strip():
        raise ImportFormatError(where, "field 'task_id': empty", field="task_id")
    if not isinstance(record.tags, list) or not all(isinstance(t, str) for t in record.tags):
        raise ImportFormatError(where, "field 'tags': expected a list of strings", field="tags")
    checked = record_check(record, where=where, timeout_s=timeout_s)
    suite_parent = parent.test_suite if parent else None
    env_parent = parent.environment if parent else None
    suite = repository_suite_get_or_create(
        checked=checked, author=author, change_note=change_note, parent=suite_parent
    )
    env = environment_get_or_create(
        content=checked.environment,
        author=author,
        change_note=change_note,
        parent=env_parent if env_parent and env_parent.content_hash else None,
    )
    task, _ = Task.objects.get_or_create(
        task_id=record.task_id,
        defaults={"source": record.source, "licence": record.licence, "metadata": record.metadata},
    )
    task_kind_check(task, kind=TaskVersion.KIND_REPOSITORY, where=where)
    changed = []
    added = [t for t in dict.fromkeys(record.tags) if t not in task.tags]
    if added:
        task.tags = [*task.tags, *added]
        changed.append("tags")
    for name in ("licence", "metadata"):
        value = getattr(record, name)
        if value and getattr(task, name) != value:
            setattr(task, name, value)
            changed.append(name)
    if changed:
        task.save(update_fields=changed)
    return task_version_get_or_create(
        task=task,
        author=author,
        change_note=change_note,
        parent=parent,
        prompt=checked.problem_statement,
        entry_point="",
        reference_solution=checked.reference_patch,
        files={},
        workspace=workspace_store(workspace=checked.workspace),
        environment=env,
        test_suite=suite,
    )


def repository_tasks_import(
    records: Iterable[RepositoryTaskRecord],
    *,
    author: str = "",
    task_set_name: str | None = None,
    change_note: str = "",
) -> ImportReport:
    """Store repository task records as task versions and pin them as a task set.

    All or nothing (one transaction). Idempotent: a record whose content matches a version of its
    task creates nothing. ``task_set_name`` defaults to the first record's ``source``. Each
    record's place in errors is ``"record N (<task_id>)"``, N counting from 1.

    Returns:
        an :class:`~tasks_library.services.ImportReport`.

    Raises:
        ImportFormatError: a record is malformed (its place and field named), a task id repeats,
            or there is no record.
    """
    return repository_records_import(
        (
            (f"record {n} ({getattr(r, 'task_id', '?')})", r, DEFAULT_TIMEOUT_S)
            for n, r in enumerate(records, start=1)
        ),
        author=author,
        task_set_name=task_set_name,
        change_note=change_note,
    )


@transaction.atomic
def repository_records_import(
    places: Iterable[tuple[str, RepositoryTaskRecord, float]],
    *,
    author: str = "",
    task_set_name: str | None = None,
    change_note: str = "",
) -> ImportReport:
    """:func:`repository_tasks_import` of ``(place, record, timeout_s)`` triples: a reader of a
    file names its records' places itself (``"FILE:LINE"``) and may give each suite's timeout."""
    author = author or command_line_author()
    report = ImportReport(task_set=task_set_name or "")
    pinned: list[TaskVersion] = []
    seen: dict[str, str] = {}
    for place, record, timeout_s in places:
        if record.task_id in seen:
            raise ImportFormatError(
                place,
                f"field 'task_id': duplicate id {record.task_id!r} "
                f"(first at {seen[record.task_id]})",
                field="task_id",
            )
        seen[record.task_id] = place
        version, created = repository_version_get_or_create(
            record=record,
            where=place,
            author=author,
            change_note=change_note or f"imported from {record.source}",
            timeout_s=timeout_s,
        )
        report.new_versions += created
        report.unchanged += not created
        report.task_ids.append(record.task_id)
        pinned.append(version)
    if not pinned:
        raise ImportFormatError(None, "no repository task to import")
    report.tasks = len(pinned)
    report.task_set = task_set_name or pinned[0].task.source
    task_set_pin(
        name=report.task_set,
        versions=pinned,
        author=author,
        change_note=change_note or f"imported {len(pinned)} repository tasks",
    )
    return report


# --- reads and edits of stored versions --------------------------------------------------------


@dataclass(frozen=True)
class RepositoryContent:
    """What an agent environment and a grader need of a repository task version, read once.

    Attributes:
        problem_statement: the task's prompt.
        files: the buggy workspace ``{path: bytes}`` (no ``.git``: the agent's repository is
            made by ``sandboxes.repository.git_workspace``).
        reference_patch: the fix, a git-style unified diff.
        fail_to_pass, pass_to_pass: pytest node ids.
        hidden_files: test files added only at grading ``{path: bytes}``.
        test_command: ``pytest`` and its arguments.
        timeout_s: seconds one grading run of the suite may take.
        environment: the :class:`~tasks_library.models.EnvironmentVersion` (build it with
            ``tasks_library.environments.environment_build(environment=...)`` and pass its
            ``request_field()`` to the sandbox).
    """

    problem_statement: str
    files: dict[str, bytes]
    reference_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hidden_files: dict[str, bytes]
    test_command: str
    timeout_s: float
    environment: EnvironmentVersion

    def tests(self) -> RepositoryTests:
        """The grading's :class:`sandboxes.repository.RepositoryTests`: the ids, the workspace's
        test files and test configuration (restored over a submission's), the hidden files, the
        command and the timeout."""
        return RepositoryTests(
            fail_to_pass=self.fail_to_pass,
            pass_to_pass=self.pass_to_pass,
            test_files={p: c for p, c in self.files.items() if is_test_path(p)},
            hidden_files=self.hidden_files,
            test_command=self.test_command,
            timeout_s=self.timeout_s,
        )


def repository_content(version: TaskVersion) -> RepositoryContent:
    """The content of a repository task version (its workspace and hidden files unpacked).

    Raises:
        ValueError: ``version`` is not a repository task.
    """
    if not version.is_repository:
        raise ValueError(f"{version} is not a repository task")
    suite = version.test_suite
    return RepositoryContent(
        problem_statement=version.prompt,
        files=version.workspace.files(),
        reference_patch=version.reference_solution,
        fail_to_pass=tuple(suite.fail_to_pass),
        pass_to_pass=tuple(suite.pass_to_pass),
        hidden_files=suite.hidden_files.files() if suite.hidden_files else {},
        test_command=suite.test_command or DEFAULT_TEST_COMMAND,
        timeout_s=suite.timeout_s,
        environment=version.environment,
    )


def version_record(version: TaskVersion) -> RepositoryTaskRecord:
    """A stored repository version as a record (for edits and exports).

    Raises:
        ValueError: ``version`` is not a repository task.
    """
    content, task = repository_content(version), version.task
    env = content.environment
    return RepositoryTaskRecord(
        task_id=task.task_id,
        problem_statement=content.problem_statement,
        files=content.files,
        reference_patch=content.reference_patch,
        fail_to_pass=list(content.fail_to_pass),
        pass_to_pass=list(content.pass_to_pass),
        environment=env.content(),
        hidden_files=content.hidden_files,
        test_command=content.test_command,
        source=task.source,
        licence=task.licence,
        tags=list(task.tags),
        metadata=dict(task.metadata),
    )


# Fields a repository version's edit may change (the names of TaskVersion and its suite).
REPOSITORY_EDITABLE = (
    "prompt",
    "reference_solution",
    "fail_to_pass",
    "pass_to_pass",
    "test_command",
    "timeout_s",
    "environment",
)


def repository_version_edit(
    *, version: TaskVersion, author: str, change_note: str, **changes
) -> TaskVersion:
    """A new version of a repository task with ``changes`` (see :data:`REPOSITORY_EDITABLE`):
    ``prompt`` is the problem statement, ``reference_solution`` the reference patch. The
    workspace and hidden files are kept (and so shared with ``version``). Called by
    :func:`tasks_library.services.task_version_edit`, inside its transaction.

    Raises:
        InputError: an unknown field, content the importer would refuse (``field`` the edit's
            field name), or no actual change.
    """
    unknown = sorted(set(changes) - set(REPOSITORY_EDITABLE))
    if unknown:
        raise InputError(
            f"{unknown[0]}: not editable on a repository task (editable: "
            f"{', '.join(REPOSITORY_EDITABLE)})",
            field=unknown[0],
        )
    record = version_record(version)
    names = {"prompt": "problem_statement", "reference_solution": "reference_patch"}
    for name, value in changes.items():
        if name != "timeout_s":
            setattr(record, names.get(name, name), value)
    where = f"edit of {version.task.task_id} v{version.number}"
    fields = {v: k for k, v in names.items()}
    try:
        new, created = repository_version_get_or_create(
            record=record,
            where=where,
            author=author,
            change_note=change_note,
            timeout_s=changes.get("timeout_s", version.test_suite.timeout_s),
            parent=version,
        )
    except ImportFormatError as exc:
        name = (exc.field or "").split(".")[0]
        name = fields.get(name, name) or None
        raise InputError(f"{name}: {exc.problem}" if name else exc.detail, field=name) from exc
    if not created:
        raise InputError(
            f"nothing changed: this content is already {new.task.task_id} v{new.number}"
        )
    return new
