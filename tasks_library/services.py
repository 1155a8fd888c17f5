"""Writes to the task library: imports, edits (new versions), task set pins, curation."""

from __future__ import annotations

import getpass
import keyword
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from core.errors import InputError
from core.names import name_problem, printable
from sandboxes.environments.spec import EnvironmentSpecError
from sandboxes.environments.spec import parse as parse_environment
from sandboxes.interpreters import node_major_version
from sandboxes.suites import PER_TEST_TIMEOUT_HARNESSES, SETUP_HARNESSES, harness
from tasks_library.hashing import content_hash
from tasks_library.importers import ImportFormatError
from tasks_library.models import (
    EnvironmentVersion,
    RepositoryWorkspace,
    Task,
    TaskSet,
    TaskSetMember,
    TaskSetVersion,
    TaskVersion,
    TestSuiteVersion,
    ValidationJob,
)
from tasks_library.testsplit import visible_subset

DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 300.0
# A function name the tests call: an identifier of Python and JavaScript alike (JavaScript's may
# hold "$"), at most 200 characters. "1 bad" or "f(); import os" name no function.
ENTRY_POINT_RE = re.compile(r"(?:[^\W\d]|\$)[\w$]{0,199}")


def entry_point_problem(value) -> str | None:
    """Why ``value`` cannot be an entry point (None when it can)."""
    if not isinstance(value, str) or not value.strip():
        return "must name the function the tests call"
    if not ENTRY_POINT_RE.fullmatch(value) or keyword.iskeyword(value):
        return (
            f"{value[:60]!r} is not a function name: letters, digits, _ and $, not starting "
            "with a digit, at most 200 characters"
        )
    return None


# Runtimes the sandboxes can run, by family: ``python3.11``, ``node20``.
RUNTIME_FAMILIES = {"python": re.compile(r"^python3\.\d+$"), "node": re.compile(r"^node\d+$")}
MAX_FILE_BYTES = 1024 * 1024
MAX_FILES_BYTES = 8 * 1024 * 1024


def command_line_author() -> str:
    """Who a management command writes as: the OS user, marked as the command line."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user} (command line)"


@dataclass
class ImportReport:
    """What an import did. ``new_versions`` counts task versions created."""

    task_set: str
    tasks: int = 0
    new_versions: int = 0
    unchanged: int = 0
    task_ids: list[str] = field(default_factory=list)


# Who made the environments Crucible creates itself (the default ones, on first use).
DEFAULT_ENVIRONMENT_AUTHOR = "crucible"


def environment_default_python() -> EnvironmentVersion:
    """The environment of the interpreter Crucible runs on, created on first use."""
    runtime = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return environment_get_or_create(
        content={
            "name": "python",
            "runtime": runtime,
            "packages": [],
            "image": f"crucible/sandbox-python:{runtime}",
        },
        author=DEFAULT_ENVIRONMENT_AUTHOR,
        change_note="the interpreter Crucible runs on, created on first use",
    )


def environment_default_node() -> EnvironmentVersion:
    """The environment of the machine's Node.js (major version), created on first use."""
    major = node_major_version()
    return environment_get_or_create(
        content={
            "name": "node",
            "runtime": f"node{major}",
            "packages": [],
            "image": f"crucible/sandbox-node:{major}",
        },
        author=DEFAULT_ENVIRONMENT_AUTHOR,
        change_note="this machine's Node.js, created on first use",
    )


ENVIRONMENTS = {"python": environment_default_python, "node": environment_default_node}


# An environment's name names files and directories (``environment_image``'s output) and is
# written into generated files (a Dockerfile): a slug, no path separator, no control character.
ENVIRONMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def environment_name_problem(name: str) -> str | None:
    """What is wrong with an environment's name, or None: a name is 1 to 100 letters, digits,
    ``.``, ``_`` or ``-``, starting with a letter or digit (``data-analysis``, ``python3.13``)."""
    if ENVIRONMENT_NAME.match(name or ""):
        return None
    return (
        f"{printable(name)} is not an environment name: use 1 to 100 letters, digits, '.', '_' "
        "or '-', starting with a letter or digit (e.g. data-analysis)"
    )


def environment_check(content: dict, *, where: str, runtime: str) -> dict:
    """``content`` as a canonical environment, checked for a sandbox of ``runtime``.

    Raises:
        ImportFormatError: a field is missing or of the wrong type, a name that is not a slug
            (:func:`environment_name_problem`), or the environment's runtime is unknown or not
            the one the test suite's harness runs on.
    """
    if not isinstance(content, dict):
        raise ImportFormatError(
            where,
            "field 'environment': expected an object with name, runtime, packages, image",
            field="environment",
        )
    canonical = {
        "name": content.get("name", runtime),
        "runtime": content.get("runtime"),
        "packages": content.get("packages", []),
        "image": content.get("image", ""),
    }
    for key in ("name", "runtime", "image"):
        if not isinstance(canonical[key], str):
            raise ImportFormatError(
                where, f"field 'environment.{key}' must be a string", field=f"environment.{key}"
            )
    problem = environment_name_problem(canonical["name"])
    if problem:
        raise ImportFormatError(
            where, f"field 'environment.name': {problem}", field="environment.name"
        )
    packages = canonical["packages"]
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise ImportFormatError(
            where,
            "field 'environment.packages' must be a list of pinned requirement strings",
            field="environment.packages",
        )
    family = next(
        (name for name, pattern in RUNTIME_FAMILIES.items() if pattern.match(canonical["runtime"])),
        None,
    )
    if family is None:
        raise ImportFormatError(
            where,
            f"field 'environment.runtime': unknown environment {canonical['runtime']!r}; "
            "known runtimes are python3.N and nodeN",
            field="environment.runtime",
        )
    if family != runtime:
        raise ImportFormatError(
            where,
            f"field 'environment.runtime': {canonical['runtime']!r} cannot run this test suite, "
            f"whose harness needs a {runtime} runtime",
            field="environment.runtime",
        )
    source_builds = content.get("source_builds", False)
    if not isinstance(source_builds, bool):
        raise ImportFormatError(
            where,
            "field 'environment.source_builds' must be true or false",
            field="environment.source_builds",
        )
    if source_builds:  # only when set: wheel-only environments keep their hashes
        canonical["source_builds"] = True
    try:  # pins are checked now; whether this machine can build them, when it builds
        parse_environment(canonical["runtime"], packages, source_builds=source_builds)
    except EnvironmentSpecError as exc:
        raise ImportFormatError(
            where, f"field 'environment.{exc.field}': {exc}", field=f"environment.{exc.field}"
        ) from None
    return canonical


def environment_get_or_create(
    *,
    content: dict,
    author: str = "",
    change_note: str = "",
    parent: EnvironmentVersion | None = None,
) -> EnvironmentVersion:
    """The environment version with exactly ``content`` (name, runtime, packages, image, and
    ``source_builds`` when set: :meth:`EnvironmentVersion.content`)."""
    env, _ = EnvironmentVersion.objects.get_or_create(
        content_hash=content_hash(content),
        defaults=dict(content, author=author, change_note=change_note, parent=parent),
    )
    return env


def timeout_check(timeout_s, *, where: str) -> float:
    """``timeout_s`` as seconds, if it is a number in (0, :data:`MAX_TIMEOUT_S`].

    Raises:
        ImportFormatError: (``timeout_s``) not a number, or out of range.
    """
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not 0 < timeout_s <= MAX_TIMEOUT_S
    ):
        raise ImportFormatError(
            where,
            f"field 'timeout_s': must be a number of seconds in (0, {MAX_TIMEOUT_S:.0f}]",
            field="timeout_s",
        )
    return float(timeout_s)


def test_suite_get_or_create(
    *,
    harness_name: str,
    hidden_tests: str,
    visible_tests: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    test_timeout_s: float | None = None,
    setup_code: str = "",
    where: str = "test suite",
    author: str = "",
    change_note: str = "",
    parent: TestSuiteVersion | None = None,
) -> TestSuiteVersion:
    """The test suite version with these tests; test ids are computed by the harness.

    ``visible_tests`` defaults to the first two tests of a ``python-check`` suite and to
    the whole suite otherwise. ``setup_code`` (python-check only) is trusted Python run
    before the tests (see :class:`~tasks_library.models.TestSuiteVersion`); the content
    hash covers it only when it is not empty, so suites without it keep their hashes.

    Raises:
        ImportFormatError: unknown harness, tests that do not parse or hold no
            assertion, a timeout outside (0, 300] seconds, a per-test timeout that is
            not in (0, timeout] or is set for a harness that has none (python-check and
            stdio have one), or setup code that is not text, does not parse or is set for
            a harness other than python-check; the message starts with ``where``.
    """
    try:
        kind = harness(harness_name)
    except ValueError as exc:
        raise ImportFormatError(where, f"field 'harness': {exc}", field="harness") from exc
    if harness_name in ("pytest-repo", "terminal"):  # families of their own, not test text
        raise ImportFormatError(
            where,
            f"field 'harness': {harness_name} belongs to "
            f"{'repository' if harness_name == 'pytest-repo' else 'terminal'} tasks, which are "
            "imported as such (import_tasks swe-bench, repo-bugs, terminal)",
            field="harness",
        )
    timeout_s = timeout_check(timeout_s, where=where)
    if test_timeout_s is not None:
        if (
            isinstance(test_timeout_s, bool)
            or not isinstance(test_timeout_s, (int, float))
            or not 0 < test_timeout_s <= timeout_s
        ):
            raise ImportFormatError(
                where,
                (
                    "field 'test_timeout_s': must be a number of seconds in (0, "
                    f"{timeout_s:g}]: no longer than the whole run's timeout"
                ),
                field="test_timeout_s",
            )
        if harness_name not in PER_TEST_TIMEOUT_HARNESSES:
            raise ImportFormatError(
                where,
                "field 'test_timeout_s': per-test timeouts apply to "
                f"{' and '.join(PER_TEST_TIMEOUT_HARNESSES)} suites only",
                field="test_timeout_s",
            )
        test_timeout_s = float(test_timeout_s)
    setup_code = _setup_code_check(setup_code, harness_name=harness_name, where=where)
    try:
        hidden_ids = kind.expected_ids(hidden_tests)
        visible = visible_tests or (
            visible_subset(hidden_tests) if harness_name == "python-check" else hidden_tests
        )
        visible_ids = kind.expected_ids(visible)
    except SyntaxError as exc:
        raise ImportFormatError(
            where,
            f"field 'test': test code does not parse ({exc.msg}, line {exc.lineno})",
            field="test",
        ) from exc
    except ValueError as exc:
        raise ImportFormatError(where, f"field 'test': {exc}", field="test") from exc
    if not hidden_ids:
        raise ImportFormatError(
            where,
            "field 'test': the tests contain no assertion, so nothing can fail",
            field="test",
        )
    content = {
        "harness": harness_name,
        "visible_tests": visible,
        "hidden_tests": hidden_tests,
        "visible_test_ids": visible_ids,
        "hidden_test_ids": hidden_ids,
        "timeout_s": float(timeout_s),
    }
    if test_timeout_s is not None:
        content["test_timeout_s"] = test_timeout_s
    if setup_code:
        content["setup_code"] = setup_code
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash=content_hash(content),
        defaults=dict(content, author=author, change_note=change_note, parent=parent),
    )
    return suite


def _setup_code_check(setup_code, *, harness_name: str, where: str) -> str:
    """``setup_code`` as stored: text that parses, for a harness that runs setup code.

    Raises:
        ImportFormatError: (field ``setup_code``) not text, set for another harness, or
            not Python that parses.
    """
    if setup_code is None:
        return ""
    if not isinstance(setup_code, str):
        raise ImportFormatError(
            where, "field 'setup_code': must be Python source text", field="setup_code"
        )
    if not setup_code.strip():
        return ""
    if harness_name not in SETUP_HARNESSES:
        raise ImportFormatError(
            where,
            f"field 'setup_code': setup code applies to {', '.join(SETUP_HARNESSES)} suites only",
            field="setup_code",
        )
    try:
        compile(setup_code, "<setup>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = f", line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        raise ImportFormatError(
            where,
            f"field 'setup_code': does not parse ({getattr(exc, 'msg', exc)}{line})",
            field="setup_code",
        ) from exc
    return setup_code


def files_check(files, *, where: str, runtime: str = "python") -> dict[str, str]:
    """Workspace files as ``{relative path: text}``, refused when unsafe or too big.

    Raises:
        ImportFormatError: not an object of strings, a path that is absolute or climbs
            out (``..``), a name that is not valid UTF-8 or holds a control character (named,
            escaped), text that is not valid UTF-8, a file over 1 MiB or all files over 8 MiB,
            or files for a runtime whose runner takes none (Node.js).
    """
    if not files:
        return {}
    if not isinstance(files, dict):
        raise ImportFormatError(
            where, "field 'files': expected an object {path: text}", field="files"
        )
    if runtime != "python":
        raise ImportFormatError(
            where,
            "field 'files': workspace files are supported by the Python verifiers only",
            field="files",
        )
    total = 0
    for name, text in files.items():
        parts = name.split("/")
        if not name or name.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise ImportFormatError(
                where,
                f"field 'files': {name!r} must be a relative path without '..'",
                field="files",
            )
        problem = name_problem(name)
        if problem:
            raise ImportFormatError(
                where,
                f"field 'files': file name {printable(name)} {problem}; rename it",
                field="files",
            )
        if not isinstance(text, str):
            raise ImportFormatError(
                where, f"field 'files.{name}': must be UTF-8 text", field=f"files.{name}"
            )
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ImportFormatError(
                where,
                f"field 'files.{name}': is not valid UTF-8 text (a lone surrogate)",
                field=f"files.{name}",
            ) from None
        if size > MAX_FILE_BYTES:
            raise ImportFormatError(
                where,
                (
                    f"field 'files.{name}': {size} bytes, over the {MAX_FILE_BYTES} byte limit "
                    "per file"
                ),
                field=f"files.{name}",
            )
        total += size
    if total > MAX_FILES_BYTES:
        raise ImportFormatError(
            where,
            f"field 'files': {total} bytes in all, over the {MAX_FILES_BYTES} byte limit",
            field="files",
        )
    return dict(sorted(files.items()))


def task_kind_check(task: Task, *, kind: str, where: str) -> None:
    """A task keeps its kind (``TaskVersion.kind``): a new version of a repository task is a
    repository task, of a function task a function task, of a terminal task a terminal task.

    Raises:
        ImportFormatError: (``task_id``) the task's versions are of another kind.
    """
    other = task.versions.exclude(kind=kind).values_list("kind", flat=True).first()
    if other is not None:
        raise ImportFormatError(
            where,
            f"field 'task_id': {task.task_id!r} is a {other} task; a {kind} task needs an id "
            "of its own",
            field="task_id",
        )


def task_version_content(
    *,
    prompt: str,
    entry_point: str,
    reference_solution: str,
    files: dict,
    environment: EnvironmentVersion,
    test_suite: TestSuiteVersion,
    workspace: RepositoryWorkspace | None = None,
    kind: str = "",
) -> dict:
    """What a task version's content hash covers (``files`` only when there are some, a
    repository task's ``workspace`` as its digest only when it has one, the kind only for a
    terminal task)."""
    content = {
        "prompt": prompt,
        "entry_point": entry_point,
        "reference_solution": reference_solution,
        "environment": environment.content_hash,
        "test_suite": test_suite.content_hash,
    }
    if files:
        content["files"] = files
    if workspace is not None:
        content["workspace"] = workspace.digest
    if kind == TaskVersion.KIND_TERMINAL:
        content["kind"] = kind
    return content


def task_version_get_or_create(
    *, task: Task, author: str, change_note: str, parent: TaskVersion | None = None, **content
) -> tuple[TaskVersion, bool]:
    """The version of ``task`` with this content, created (numbered after the latest) if new.

    ``parent`` defaults to the task's latest version. Returns ``(version, created)``.
    """
    digest = content_hash(task_version_content(**content))
    existing = TaskVersion.objects.filter(task=task, content_hash=digest).first()
    if existing is not None:
        return existing, False
    if parent is None:
        parent = task.versions.order_by("-number").first()
    number = (task.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    kind = content.pop("kind", "") or (
        TaskVersion.KIND_REPOSITORY if content.get("workspace") else TaskVersion.KIND_FUNCTION
    )
    version = TaskVersion.objects.create(
        task=task,
        content_hash=digest,
        parent=parent,
        number=number,
        author=author,
        change_note=change_note,
        kind=kind,
        **content,
    )
    return version, True


@transaction.atomic
def tasks_import(
    *,
    source: str,
    task_set_name: str,
    records: Iterable[dict],
    change_note: str = "",
    author: str = "",
) -> ImportReport:
    """Import task records and pin them as the task set ``task_set_name``.

    A record is ``{"task_id", "prompt", "entry_point", "reference_solution", "tests",
    "where"}``, or ``{"task_id", "repository", "where"}`` with a
    :class:`~tasks_library.repositories.RepositoryTaskRecord` (and optionally ``timeout_s``,
    ``change_note``) for a repository task; a function task's record has, optionally,
    ``visible_tests``, ``harness`` (default ``python-check``), ``timeout_s``,
    ``test_timeout_s``, ``setup_code``, ``environment`` (an object; default: this machine's
    runtime for the harness), ``files``, ``tags``, ``source``, ``change_note``.

    Idempotent: a record whose content matches an existing version of its task
    creates nothing; a changed record creates a new version (parent: the latest)
    and keeps the old. All or nothing: any error rolls the whole import back.

    Raises:
        ImportFormatError: a record is malformed (the message names file, line, field).
    """
    author = author or command_line_author()
    note = change_note or f"imported from {source}"
    defaults: dict[str, EnvironmentVersion] = {}
    report = ImportReport(task_set=task_set_name)
    pinned: list[TaskVersion] = []
    first_seen: dict[str, str] = {}
    for record in records:
        where = record["where"]
        if record["task_id"] in first_seen:
            raise ImportFormatError(
                where,
                f"field 'task_id': duplicate id {record['task_id']!r} "
                f"(first at {first_seen[record['task_id']]})",
                field="task_id",
            )
        first_seen[record["task_id"]] = where
        if record.get("repository") is not None:  # a repository task (Crucible's format)
            # repositories builds on this module, so it is imported where it is needed.
            from tasks_library.repositories import (  # noqa: PLC0415 (it imports this module)
                repository_version_get_or_create,
            )

            version, created = repository_version_get_or_create(
                record=record["repository"],
                where=where,
                author=author,
                change_note=record.get("change_note") or note,
                timeout_s=record.get("timeout_s", DEFAULT_TIMEOUT_S),
            )
            report.new_versions += created
            report.unchanged += not created
            pinned.append(version)
            report.task_ids.append(version.task.task_id)
            continue
        suite = test_suite_get_or_create(
            harness_name=record.get("harness") or "python-check",
            hidden_tests=record["tests"],
            visible_tests=record.get("visible_tests"),
            timeout_s=record.get("timeout_s", DEFAULT_TIMEOUT_S),
            test_timeout_s=record.get("test_timeout_s"),
            setup_code=record.get("setup_code") or "",
            where=where,
            author=author,
            change_note=note,
        )
        runtime = harness(suite.harness).runtime
        if record.get("environment") is not None:
            env = environment_get_or_create(
                content=environment_check(record["environment"], where=where, runtime=runtime),
                author=author,
                change_note=note,
            )
        else:
            if runtime not in defaults:
                defaults[runtime] = ENVIRONMENTS[runtime]()
            env = defaults[runtime]
        tags = record.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ImportFormatError(where, "field 'tags': expected a list of strings", field="tags")
        problem = entry_point_problem(record["entry_point"])
        if problem:
            raise ImportFormatError(where, f"field 'entry_point': {problem}", field="entry_point")
        task, _ = Task.objects.get_or_create(
            task_id=record["task_id"], defaults={"source": record.get("source") or source}
        )
        task_kind_check(task, kind=TaskVersion.KIND_FUNCTION, where=where)
        added = [t for t in dict.fromkeys(tags) if t not in task.tags]
        if added:
            task.tags = [*task.tags, *added]
            task.save(update_fields=["tags"])
        version, created = task_version_get_or_create(
            task=task,
            author=author,
            change_note=record.get("change_note") or note,
            prompt=record["prompt"],
            entry_point=record["entry_point"],
            reference_solution=record["reference_solution"],
            files=files_check(record.get("files"), where=where, runtime=runtime),
            environment=env,
            test_suite=suite,
        )
        report.new_versions += created
        report.unchanged += not created
        pinned.append(version)
        report.task_ids.append(task.task_id)
    if not pinned:
        raise ImportFormatError(None, "the file holds no task; nothing to import")
    report.tasks = len(pinned)
    task_set_pin(name=task_set_name, versions=pinned, author=author, change_note=note)
    return report


EDITABLE = (
    "prompt",
    "entry_point",
    "reference_solution",
    "files",
    "hidden_tests",
    "visible_tests",
    "timeout_s",
    "test_timeout_s",
    "setup_code",
    "harness",
    "environment",
)


def _edit_field(field: str | None, changed) -> str | None:
    """The edit's field for a field the importer's checks name: test code (``test``) is the hidden
    tests unless only the visible tests changed; ``files.NAME`` is ``files``, ``environment.KEY``
    is ``environment``."""
    if field is None:
        return None
    name = field.split(".")[0]
    if name in ("test", "tests"):
        return "visible_tests" if set(changed) == {"visible_tests"} else "hidden_tests"
    return name


@transaction.atomic
def task_version_edit(
    *, version: TaskVersion, author: str, change_note: str, **changes
) -> TaskVersion:
    """Make a new version of ``version``'s task with ``changes`` applied; nothing is overwritten.

    ``changes`` may name any of :data:`EDITABLE` (a repository task's, those of
    :data:`tasks_library.repositories.REPOSITORY_EDITABLE`); ``environment`` is an environment
    object (name, runtime, packages, image). The new version's parent is ``version``;
    a new test suite or environment version is created (parent: the old one) when
    their content changes. The new version starts ``pending`` validation.

    Raises:
        InputError: no change note, an unknown field, no actual change, or content the
            importer would refuse (``field`` names the edit's field).
    """
    if not change_note.strip():
        raise InputError(
            "change_note: say what changed and why; every version records it", field="change_note"
        )
    if version.is_repository:
        # repositories builds on this module, so it is imported where it is needed.
        from tasks_library.repositories import repository_version_edit  # noqa: PLC0415

        return repository_version_edit(
            version=version, author=author, change_note=change_note.strip(), **changes
        )
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise InputError(
            f"{unknown[0]}: not an editable field (editable: {', '.join(EDITABLE)})",
            field=unknown[0],
        )
    suite, env = version.test_suite, version.environment
    where = f"edit of {version.task.task_id} v{version.number}"
    try:
        new_suite = test_suite_get_or_create(
            harness_name=changes.get("harness", suite.harness),
            hidden_tests=changes.get("hidden_tests", suite.hidden_tests),
            visible_tests=changes.get("visible_tests", suite.visible_tests),
            timeout_s=changes.get("timeout_s", suite.timeout_s),
            test_timeout_s=changes.get("test_timeout_s", suite.test_timeout_s),
            setup_code=changes.get("setup_code", suite.setup_code),
            where=where,
            author=author,
            change_note=change_note,
            parent=suite,
        )
        runtime = harness(new_suite.harness).runtime
        env_content = env.content()
        new_env = environment_get_or_create(
            content=environment_check(
                changes.get("environment", env_content), where=where, runtime=runtime
            ),
            author=author,
            change_note=change_note,
            parent=env,
        )
        files = files_check(changes.get("files", version.files), where=where, runtime=runtime)
    except ImportFormatError as exc:
        field = _edit_field(exc.field, changes)
        raise InputError(f"{field}: {exc.problem}" if field else exc.detail, field=field) from exc
    for name in ("prompt", "entry_point", "reference_solution"):
        if not isinstance(changes.get(name, ""), str):
            raise InputError(f"{name}: must be text", field=name)
    if not changes.get("prompt", version.prompt).strip():
        raise InputError(
            "prompt: the prompt is empty; write what the policy is asked to do (the signature "
            "and docstring it completes)",
            field="prompt",
        )
    problem = entry_point_problem(changes.get("entry_point", version.entry_point))
    if problem:
        raise InputError(f"entry_point: {problem}", field="entry_point")
    new, created = task_version_get_or_create(
        task=version.task,
        author=author,
        change_note=change_note.strip(),
        parent=version,
        prompt=changes.get("prompt", version.prompt),
        entry_point=changes.get("entry_point", version.entry_point),
        reference_solution=changes.get("reference_solution", version.reference_solution),
        files=files,
        environment=new_env,
        test_suite=new_suite,
    )
    if not created:
        raise InputError(
            f"nothing changed: this content is already {new.task.task_id} v{new.number}"
        )
    return new


@transaction.atomic
def task_set_pin(
    *,
    name: str,
    versions: list[TaskVersion],
    description: str = "",
    author: str = "",
    change_note: str = "",
) -> TaskSet:
    """Create or replace the task set ``name`` so it pins exactly ``versions``, in order.

    Records a new :class:`TaskSetVersion` when the pins differ from the set's latest.
    """
    task_set, _ = TaskSet.objects.get_or_create(name=name)
    if description:
        task_set.description = description
    task_set.members.all().delete()
    TaskSetMember.objects.bulk_create(
        TaskSetMember(task_set=task_set, task_version=v, position=i) for i, v in enumerate(versions)
    )
    task_set.save()
    pins = [[v.task.task_id, v.content_hash] for v in versions]
    digest = content_hash({"task_versions": pins})
    latest = task_set.versions.order_by("-number").first()
    if latest is None or latest.content_hash != digest:
        TaskSetVersion.objects.create(
            task_set=task_set,
            number=(latest.number + 1) if latest else 1,
            content_hash=digest,
            task_versions=pins,
            author=author or command_line_author(),
            change_note=change_note,
        )
    return task_set


@transaction.atomic
def task_versions_quarantine(*, version_ids: list[int], author: str, reason: str) -> int:
    """Quarantine versions by hand so training never samples them; returns how many changed.

    Raises:
        InputError: no written reason.
    """
    if not reason.strip():
        raise InputError("reason: write why these versions are quarantined", field="reason")
    return TaskVersion.objects.filter(pk__in=version_ids).update(
        quarantined=True,
        quarantine_reason=reason.strip(),
        override_reason="",
        curated_by=author,
        curated_at=timezone.now(),
    )


@transaction.atomic
def task_versions_approve(*, version_ids: list[int], author: str, reason: str) -> int:
    """Lift the quarantine of versions (a curator's override); returns how many changed.

    The verdict and its evidence stay; the written reason is kept beside them.

    Raises:
        InputError: no written reason (``field`` ``reason``), or a version not yet validated
            (``ids``).
    """
    if not reason.strip():
        raise InputError("reason: write why these versions may be trained on", field="reason")
    pending = TaskVersion.objects.filter(
        pk__in=version_ids,
        verdict__in=[TaskVersion.VERDICT_PENDING, TaskVersion.VERDICT_INFRA_ERROR],
    )
    if pending.exists():
        names = ", ".join(str(v) for v in pending[:5])
        raise InputError(
            f"validate first: {names} has no verdict yet (run validate_tasks)", field="ids"
        )
    return TaskVersion.objects.filter(pk__in=version_ids).update(
        quarantined=False,
        override_reason=reason.strip(),
        curated_by=author,
        curated_at=timezone.now(),
    )


def task_version_record_attempts(*, version_id: int, passed: int, total: int) -> None:
    """Add graded attempts (evaluations, rollouts) to a version's pass-rate counts."""
    if not 0 <= passed <= total:
        raise ValueError(f"passed={passed} must be within 0..total={total}")
    TaskVersion.objects.filter(pk=version_id).update(
        attempts_passed=F("attempts_passed") + passed, attempts_total=F("attempts_total") + total
    )


# --- validation jobs: the pipeline in the background, followed by pages and scripts ------------


@transaction.atomic
def validation_job_create(*, version_ids: list[int], options: dict, author: str) -> ValidationJob:
    """A queued job for the validation of these versions (the caller then queues its Celery task).

    Raises:
        InputError: (``ids``) no version, or an id that is no task version.
    """
    ids = list(dict.fromkeys(int(i) for i in version_ids))
    if not ids:
        raise InputError("ids: select at least one task version", field="ids")
    found = set(TaskVersion.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        raise InputError(f"ids: no task version with id {missing[0]}", field="ids")
    return ValidationJob.objects.create(version_ids=ids, options=options or {}, created_by=author)


def validation_job_progress(*, job_id: int, stage: str, done: int, total: int) -> None:
    """The job runs ``stage``: ``done`` of ``total`` stages are behind it."""
    now = timezone.now()
    ValidationJob.objects.filter(pk=job_id, started_at=None).update(started_at=now)
    ValidationJob.objects.filter(pk=job_id).update(
        status=ValidationJob.RUNNING, stage=stage, stages_done=done, stages_total=total
    )


def validation_job_finish(*, job_id: int, versions: list[TaskVersion]) -> None:
    """The job is done: each version's verdict, quarantine and reasons become its result."""
    results = [
        {
            "id": v.pk,
            "task_id": v.task.task_id,
            "number": v.number,
            "verdict": current.verdict,
            "quarantined": current.quarantined,
            "reasons": current.verdict_reasons,
            "mutation_score": current.mutation_score,
        }
        for v in versions
        for current in [TaskVersion.objects.get(pk=v.pk)]
    ]
    ValidationJob.objects.filter(pk=job_id).update(
        status=ValidationJob.DONE,
        stage="",
        stages_done=F("stages_total"),
        results=results,
        finished_at=timezone.now(),
    )


def validation_job_fail(*, job_id: int, error: str) -> None:
    """The job failed (the pipeline raised, the queue was unreachable): say why."""
    ValidationJob.objects.filter(pk=job_id).update(
        status=ValidationJob.FAILED, error=error[:2000], finished_at=timezone.now()
    )
