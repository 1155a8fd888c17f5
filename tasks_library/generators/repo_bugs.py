"""Repository tasks generated from real projects: SWE-smith's idea, done inside Crucible.

:func:`generate` takes a project by exact version (``inflection==0.5.1``), fetches its source
distribution with pip (``sdists``), runs its test suite in the sandbox with the repository
grader's own runner (``suite``) to find the tests that pass on the pristine project, injects
bugs into the functions the tests mention (``bugs``) and keeps a bug when it makes between 1
and ``max_failing`` of those tests fail while the others still pass. Every list is measured,
never guessed:

* FAIL_TO_PASS: the tests that passed on the pristine project (in two runs) and fail with the
  bug, on the whole suite.
* PASS_TO_PASS: tests that passed on the pristine project (both runs) and still pass with the
  bug: every such test of the test modules that cover the changed module, then a seeded
  sample of the others, at most ``pass_to_pass_limit`` in all (default 100): enough to catch
  a fix that breaks its neighbours, few enough that a grading runs in about a second.

A candidate runs first on the test modules that cover its module (those named after it, or
importing it by its dotted name; all of them when none do) and, when 1 to ``max_failing`` of
them fail there, on the whole suite. The reference patch is ``make_patch(buggy, pristine)``:
one file, the few lines changed. The workspace is the whole sdist (less ``*.egg-info``) with
the bug in it, tests included (visible: the failing tests are how the bug shows, as in a
project's CI); no hidden files. Deterministic for a given project, seed and settings.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from core.errors import InputError
from sandboxes.repository.patches import apply_patch, make_patch
from tasks_library.environments import environment_create, environment_request
from tasks_library.generators import bugs as bug_maker
from tasks_library.generators.sdists import Project, SdistError, fetch, read_project
from tasks_library.generators.statements import problem_statement
from tasks_library.generators.suite import ProjectSuite, SuiteRun
from tasks_library.models import TaskVersion
from tasks_library.repositories import (
    DEFAULT_ENVIRONMENT,
    RepositoryTaskRecord,
    repository_tasks_import,
)
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import ImportReport
from tasks_library.validation.pipeline import Options, task_versions_validate

PROJECTS_FILE = Path(__file__).resolve().parents[1] / "data" / "repo_bugs_projects.json"
DEFAULT_MAX_FAILING = 10
DEFAULT_PASS_TO_PASS = 100
DEFAULT_REFERENCE_RUNS = 3


@dataclass
class GenerationReport:
    """What :func:`generate` made and what it cost.

    Attributes:
        records: the tasks, in the order they were found.
        tried: bugs run; rejected: why the others were dropped (``no_test_fails``,
            ``too_many_fail``, ``timeout``, ``suite_error``, ``same_function``...).
        suite_tests: tests pytest collects; pristine_passing: those that passed twice.
        suite_seconds: one pristine run of the whole suite; seconds: the whole generation.
    """

    package: str
    version: str
    licence: str
    records: list[RepositoryTaskRecord] = field(default_factory=list)
    tried: int = 0
    rejected: Counter = field(default_factory=Counter)
    suite_tests: int = 0
    pristine_passing: int = 0
    suite_seconds: float = 0.0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The figures as JSON-ready data (no records)."""
        made = len(self.records)
        return {
            "package": f"{self.package}=={self.version}",
            "licence": self.licence,
            "tasks": made,
            "tried": self.tried,
            "rejected": dict(sorted(self.rejected.items())),
            "suite_tests": self.suite_tests,
            "pristine_passing": self.pristine_passing,
            "suite_seconds": round(self.suite_seconds, 2),
            "seconds": round(self.seconds, 1),
            "seconds_per_task": round(self.seconds / made, 2) if made else None,
            "kinds": dict(Counter(r.metadata["bug"]["kind"] for r in self.records)),
        }


def known_projects() -> list[dict]:
    """The projects chosen for generated tasks, and why (``tasks_library/data/
    repo_bugs_projects.json``): ``package`` (``NAME==VERSION``), ``licence``,
    ``test_packages`` (pinned test dependencies beyond pytest), ``why``."""
    return json.loads(PROJECTS_FILE.read_text(encoding="utf-8"))["projects"]


def environment_content(pin: str) -> dict:
    """The environment a project's tasks run in: ``{"name", "runtime", "packages"}`` with
    pytest and the project's own test dependencies pinned (from :func:`known_projects`; just
    pytest for another project). The project itself is not installed: it is the workspace."""
    extra: list[str] = []
    for project in known_projects():
        if project["package"].lower() == pin.strip().lower():
            extra = list(project.get("test_packages", []))
    if not extra:  # the repository tasks' default environment, shared with other sources
        return dict(DEFAULT_ENVIRONMENT)
    packages = [*DEFAULT_ENVIRONMENT["packages"], *extra]
    name = f"{DEFAULT_ENVIRONMENT['name']}-" + "-".join(p.replace("==", "-") for p in extra)
    return {**DEFAULT_ENVIRONMENT, "name": name[:100], "packages": packages}


def test_command(project: Project) -> str:
    """How a task's suite runs: pytest from the workspace root, the project imported from
    ``pythonpath`` (its root, or ``src`` for a src layout), no cache directory written."""
    return f"pytest -o pythonpath={project.pythonpath}"


def module_name(path: str) -> str:
    """``src/cachetools/func.py`` -> ``cachetools.func``; ``pkg/__init__.py`` -> ``pkg``."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def covering_tests(project: Project, path: str) -> list[str]:
    """The test modules that cover the source module at ``path``: named after it
    (``test_<stem>.py``, ``<stem>_test.py``, ``test_<stem>_*.py``), or importing its dotted
    name; ``[]`` (meaning: the whole suite) when none do."""
    dotted = module_name(path)
    stem = dotted.rsplit(".", 1)[-1]
    imports = re.compile(
        rf"^\s*(from\s+{re.escape(dotted)}\s+import|import\s+{re.escape(dotted)}\b)", re.MULTILINE
    )
    found = []
    for test in project.test_files:
        name = PurePosixPath(test).stem
        named = name in (f"test_{stem}", f"{stem}_test") or name.startswith(f"test_{stem}_")
        text = project.files[test].decode("utf-8", "replace")
        if named or ("." in dotted and imports.search(text)):
            found.append(test)
    return found


def _in_modules(ids: set[str], modules: list[str]) -> set[str]:
    if not modules:
        return set(ids)
    prefixes = tuple(f"{m}::" for m in modules)
    return {i for i in ids if i.startswith(prefixes)}


def _pass_to_pass(
    still: set[str], near: set[str], order: dict[str, int], *, limit: int, rng: random.Random
) -> list[str]:
    chosen = sorted(still & near, key=order.__getitem__)
    if len(chosen) > limit:
        chosen = sorted(rng.sample(chosen, limit), key=order.__getitem__)
    rest = sorted(still - near, key=order.__getitem__)
    chosen += rng.sample(rest, min(len(rest), limit - len(chosen)))
    return sorted(chosen, key=order.__getitem__)


def generate(
    pin: str,
    *,
    count: int,
    environment: dict,
    seed: int = 0,
    max_failing: int = DEFAULT_MAX_FAILING,
    pass_to_pass_limit: int = DEFAULT_PASS_TO_PASS,
    max_tries: int | None = None,
    per_function: int = 1,
    cache_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> GenerationReport:
    """Generate up to ``count`` repository tasks from the project ``pin`` (``NAME==VERSION``).

    Args:
        environment: the built environment of :func:`environment_content`
            (``tasks_library.environments.environment_request``).
        seed: orders the candidate bugs and samples PASS_TO_PASS; same seed, same tasks.
        max_failing: keep a bug when 1 to this many tests fail with it (k).
        pass_to_pass_limit: at most this many PASS_TO_PASS ids per task.
        max_tries: stop after running this many candidates (default ``20 * count + 20``).
        per_function: at most this many tasks per function (variety over near-duplicates).
        cache_dir: where sdists are kept (default ``settings.SDIST_CACHE``).
        progress: called with a line per kept task.

    Returns:
        a :class:`GenerationReport`; fewer records than ``count`` when the candidates or
        ``max_tries`` ran out (``rejected`` says why).

    Raises:
        SdistError: a bad pin, a package or version the index lacks, an sdist without tests,
            or a suite that does not pass on the pristine project (field ``package``).
        InputError: the sandbox could not run the pristine suite (an ``infra_error``).
        SessionLost: no sandbox session slot is running.
        ValueError: ``count``, ``max_failing`` or ``pass_to_pass_limit`` below 1.
    """
    for name, value in (("count", count), ("max_failing", max_failing)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if pass_to_pass_limit < 1:
        raise ValueError(f"pass_to_pass_limit must be at least 1, not {pass_to_pass_limit}")
    say = progress or (lambda _line: None)
    started = time.monotonic()
    archive = fetch(pin, cache_dir=cache_dir)
    project = read_project(archive)
    label = f"{project.name}=={project.version}"
    report = GenerationReport(project.name, project.version, project.licence, notes=project.notes)
    environment_spec = environment_content(label)
    sources = {}
    for path in project.source_files:
        try:
            sources[path] = project.files[path].decode("utf-8")
        except UnicodeDecodeError:
            report.notes.append(f"{path}: not UTF-8, left alone")
    covered = bug_maker.names_in_tests(
        [project.files[t].decode("utf-8", "replace") for t in project.test_files]
    )
    rng = random.Random(seed)
    suite = ProjectSuite(project.files, environment=environment, test_command=test_command(project))
    runs = [suite.run(), suite.run()]
    for run in runs:
        if run.status == "infra_error":
            raise InputError(
                f"the sandbox could not run {label}'s suite ({run.detail[:300]}); is a sandbox "
                "worker running (manage.py sandbox_worker)?"
            )
        if run.status != "ok":
            raise SdistError(
                f"package {label}: its test suite does not run on the pristine project "
                f"({run.status}: {run.detail[:600]})",
                field="package",
            )
    collected = sorted(set(runs[0].results) | set(runs[1].results))
    order = {node: i for i, node in enumerate(collected)}
    passing = runs[0].passed() & runs[1].passed()
    report.suite_tests, report.pristine_passing = len(collected), len(passing)
    report.suite_seconds = max(r.seconds for r in runs)
    if not passing:
        failures = "; ".join(f"{k}: {v}" for k, v in list(runs[0].messages.items())[:3])
        raise SdistError(
            f"package {label}: none of its {len(collected)} tests passes on the pristine "
            "project in this environment; its suite needs something the environment lacks "
            f"({failures[:600]})",
            field="package",
        )
    flaky = runs[0].passed() ^ runs[1].passed()
    if flaky:
        report.notes.append(f"{len(flaky)} test(s) passed in one pristine run only: left out")
    timeout_s = max(30.0, 5 * report.suite_seconds)
    per_function_count: Counter = Counter()
    limit = max_tries if max_tries is not None else 20 * count + 20
    for bug in bug_maker.sample(sources, seed=seed, covered=covered):
        if len(report.records) >= count or report.tried >= limit:
            break
        if per_function_count[(bug.path, bug.function)] >= per_function:
            report.rejected["same_function"] += 1
            continue
        report.tried += 1
        outcome = _try(suite, project, bug, passing, max_failing, timeout_s)
        if isinstance(outcome, str):
            report.rejected[outcome] += 1
            continue
        modules, full = outcome
        failing = passing - full.passed()
        near = _in_modules(passing, modules)
        p2p = _pass_to_pass(passing & full.passed(), near, order, limit=pass_to_pass_limit, rng=rng)
        record = _record(project, bug, failing, p2p, full, order, environment_spec, seed)
        report.records.append(record)
        per_function_count[(bug.path, bug.function)] += 1
        say(
            f"{record.task_id}: {bug.kind} in {bug.path}:{bug.function}, "
            f"{len(failing)} FAIL_TO_PASS, {len(p2p)} PASS_TO_PASS"
        )
    report.seconds = time.monotonic() - started
    return report


def _try(
    suite: ProjectSuite,
    project: Project,
    bug: bug_maker.Bug,
    passing: set[str],
    max_failing: int,
    timeout_s: float,
) -> tuple[list[str], SuiteRun] | str:
    """Run ``bug`` on its covering modules, then on the whole suite: ``(modules, the whole
    suite's run)`` when 1 to ``max_failing`` passing tests fail, else the reason it is dropped."""
    changed = {bug.path: bug.buggy.encode("utf-8")}
    modules = covering_tests(project, bug.path)
    if set(modules) == set(project.test_files):
        modules = []  # they are the whole suite: one run of it says all
    runs = []
    for targets in [modules, []] if modules else [[]]:
        run = suite.run(changed=changed, targets=targets, timeout_s=timeout_s)
        if run.status != "ok":
            return run.status if run.status in ("timeout", "infra_error") else "suite_error"
        failing = _in_modules(passing, targets) - run.passed()
        if not failing:
            return "no_test_fails"
        if len(failing) > max_failing:
            return "too_many_fail"
        runs.append(run)
    return modules, runs[-1]


def _record(
    project: Project,
    bug: bug_maker.Bug,
    failing: set[str],
    pass_to_pass: list[str],
    run: SuiteRun,
    order: dict[str, int],
    environment_spec: dict,
    seed: int,
) -> RepositoryTaskRecord:
    pristine = project.files[bug.path]
    buggy = bug.buggy.encode("utf-8")
    patch = make_patch({bug.path: buggy}, {bug.path: pristine})
    if apply_patch({bug.path: buggy}, patch)[bug.path] != pristine:  # make_patch's contract
        raise RuntimeError(f"the reference patch of {bug.path} does not restore it")
    files = dict(project.files)
    files[bug.path] = buggy
    digest = hashlib.sha256(buggy + bug.path.encode()).hexdigest()[:8]
    fail_to_pass = sorted(failing, key=order.__getitem__)
    messages = {node: run.messages.get(node, "") for node in fail_to_pass}
    return RepositoryTaskRecord(
        task_id=f"repo-bugs/{project.name}-{project.version}/{module_name(bug.path)}.{bug.function}-{digest}",
        problem_statement=problem_statement(
            project.name, project.version, messages, total=len(order)
        ),
        files=files,
        reference_patch=patch,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        environment=environment_spec,
        test_command=test_command(project),
        source="repo-bugs",
        licence=project.licence,
        tags=["repo-bugs", project.name, bug.kind],
        metadata={
            "package": project.name,
            "version": project.version,
            "archive": project.archive,
            "licence_files": list(project.licence_files),
            "seed": seed,
            "bug": {
                "path": bug.path,
                "function": bug.function,
                "line": bug.line,
                "kind": bug.kind,
                "description": bug.description,
            },
            "failures": messages,
        },
    )


@dataclass
class RepoBugsImport:
    """What :func:`repo_bugs_import` did.

    Attributes:
        report: the generation's :class:`GenerationReport`.
        imported: the import's ``ImportReport``.
        verdicts: validation verdict -> how many of the imported versions got it.
        versions: the imported versions, validated (their ``verdict`` and ``report`` set).
        validation_seconds: wall time of the validation.
        environment_seconds: wall time of creating (and building, or finding in the store) the
            project's environment.
        import_seconds: wall time of the import (one transaction).
    """

    report: GenerationReport
    imported: ImportReport
    verdicts: dict[str, int]
    versions: list[TaskVersion]
    validation_seconds: float
    environment_seconds: float = 0.0
    import_seconds: float = 0.0

    def summary(self) -> dict:
        """The generation's figures, the import's counts and the validation's verdicts."""
        out = self.report.summary()
        validated = len(self.versions)
        out.update(
            task_set=self.imported.task_set,
            imported=self.imported.tasks,
            new_versions=self.imported.new_versions,
            unchanged=self.imported.unchanged,
            verdicts=dict(sorted(self.verdicts.items())),
            valid=self.verdicts.get(TaskVersion.VERDICT_VALID, 0),
            validation_seconds=round(self.validation_seconds, 1),
            environment_seconds=round(self.environment_seconds, 3),
            import_seconds=round(self.import_seconds, 3),
            validation_seconds_per_task=(
                round(self.validation_seconds / validated, 2) if validated else None
            ),
        )
        return out


def repo_bugs_import(
    *,
    pin: str,
    count: int,
    seed: int = 0,
    max_failing: int = DEFAULT_MAX_FAILING,
    task_set_name: str | None = None,
    reference_runs: int = DEFAULT_REFERENCE_RUNS,
    author: str = "",
    progress: Callable[[str], None] | None = None,
) -> RepoBugsImport:
    """Generate tasks from ``pin`` (:func:`generate`) in the project's environment (created as
    an environment version and built through ``tasks_library.environments``), import them with
    ``repository_tasks_import`` (one transaction) as the task set ``task_set_name`` (default
    ``repo-bugs-NAME-VERSION``), then validate the imported versions with the pipeline
    (``task_versions_validate``: the reference patch graded ``reference_runs`` times with
    identical per-id results, the empty patch once, every id collected; a version that fails is
    quarantined with its evidence).

    Raises:
        SdistError: see :func:`generate`.
        InputError: the environment cannot be built (``EnvironmentUnavailable``); no bug was
            kept (field ``count``: the rejections are named); ``reference_runs`` out of range.
        ImportFormatError: a record the import refuses (nothing written).
        SessionLost: no sandbox session slot is running.
    """
    options = Options(reference_runs=reference_runs, mutants=0, examples=False)
    options.check()
    content = environment_content(pin)
    started = time.monotonic()
    environment = environment_create(
        name=content["name"],
        runtime=content["runtime"],
        packages=content["packages"],
        image=content.get("image", ""),
    )
    request = environment_request(environment)  # built here, or found in the store
    environment_seconds = time.monotonic() - started
    report = generate(
        pin,
        count=count,
        seed=seed,
        max_failing=max_failing,
        environment=request,
        progress=progress,
    )
    if not report.records:
        raise InputError(
            f"package {pin}: no bug was kept after {report.tried} tries "
            f"(rejected: {dict(report.rejected)}); try another --seed or a larger --max-failing",
            field="count",
        )
    started = time.monotonic()
    imported = repository_tasks_import(
        report.records,
        author=author,
        task_set_name=task_set_name or f"repo-bugs-{report.package}-{report.version}",
        change_note=f"generated from {report.package}=={report.version} (seed {seed})",
    )
    import_seconds = time.monotonic() - started
    started = time.monotonic()
    versions = task_versions_validate(
        versions=list(task_set_versions(task_set=task_set_get(name=imported.task_set))),
        options=options,
    )
    verdicts = Counter(version.verdict for version in versions)
    return RepoBugsImport(
        report,
        imported,
        dict(verdicts),
        versions,
        validation_seconds=time.monotonic() - started,
        environment_seconds=environment_seconds,
        import_seconds=import_seconds,
    )
