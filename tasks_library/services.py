"""Writes to the task library: imports and validation verdicts."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from sandboxes import result as R
from sandboxes.queue import run_many
from sandboxes.runtimes import node_major_version
from sandboxes.suites import harness
from sandboxes.process import Limits
from tasks_library.hashing import content_hash
from tasks_library.importers import ImportFormatError
from tasks_library.models import EnvironmentVersion, Task, TaskSet, TaskSetMember, TaskVersion, TestSuiteVersion
from tasks_library.testsplit import visible_subset

DEFAULT_TIMEOUT_S = 10.0


@dataclass
class ImportReport:
    """What an import did. ``new_versions`` counts task versions created."""

    task_set: str
    tasks: int = 0
    new_versions: int = 0
    unchanged: int = 0
    task_ids: list[str] = field(default_factory=list)


def environment_default_python() -> EnvironmentVersion:
    """The environment of the interpreter Crucible runs on, created on first use."""
    runtime = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return _environment({"name": "python", "runtime": runtime, "packages": [], "image": f"crucible/sandbox-python:{runtime}"})


def environment_default_node() -> EnvironmentVersion:
    """The environment of the machine's Node.js (major version), created on first use."""
    major = node_major_version()
    return _environment({"name": "node", "runtime": f"node{major}", "packages": [], "image": f"crucible/sandbox-node:{major}"})


def _environment(content: dict) -> EnvironmentVersion:
    env, _ = EnvironmentVersion.objects.get_or_create(content_hash=content_hash(content), defaults=content)
    return env


ENVIRONMENTS = {"python": environment_default_python, "node": environment_default_node}


def _test_suite_for(record: dict) -> TestSuiteVersion:
    name = record.get("harness", "python-check")
    kind = harness(name)
    hidden = record["tests"]
    try:
        hidden_ids = kind.expected_ids(hidden)
        visible = record.get("visible_tests") or (visible_subset(hidden) if name == "python-check" else hidden)
        visible_ids = kind.expected_ids(visible)
    except SyntaxError as exc:
        raise ImportFormatError(f"{record['where']}: field 'test': test code does not parse ({exc.msg}, line {exc.lineno})") from exc
    except ValueError as exc:
        raise ImportFormatError(f"{record['where']}: field 'test': {exc}") from exc
    if not hidden_ids:
        raise ImportFormatError(f"{record['where']}: field 'test': the tests contain no assertion, so nothing can fail")
    content = {
        "harness": name,
        "visible_tests": visible,
        "hidden_tests": hidden,
        "visible_test_ids": visible_ids,
        "hidden_test_ids": hidden_ids,
        "timeout_s": DEFAULT_TIMEOUT_S,
    }
    suite, _ = TestSuiteVersion.objects.get_or_create(content_hash=content_hash(content), defaults=content)
    return suite


@transaction.atomic
def tasks_import(*, source: str, task_set_name: str, records: Iterable[dict], change_note: str = "") -> ImportReport:
    """Import task records and pin them as the task set ``task_set_name``.

    Idempotent: a record whose content matches an existing version of its task
    creates nothing; a changed record creates a new version (parent: the latest)
    and keeps the old. All or nothing: any error rolls the whole import back.

    Raises:
        ImportFormatError: a record is malformed (the message names file, line, field).
    """
    environments: dict[str, EnvironmentVersion] = {}
    report = ImportReport(task_set=task_set_name)
    pinned: list[TaskVersion] = []
    for record in records:
        suite = _test_suite_for(record)
        runtime = harness(suite.harness).runtime
        if runtime not in environments:
            environments[runtime] = ENVIRONMENTS[runtime]()
        env = environments[runtime]
        content = {
            "prompt": record["prompt"],
            "entry_point": record["entry_point"],
            "reference_solution": record["reference_solution"],
            "environment": env.content_hash,
            "test_suite": suite.content_hash,
        }
        digest = content_hash(content)
        task, _ = Task.objects.get_or_create(task_id=record["task_id"], defaults={"source": source})
        version = TaskVersion.objects.filter(task=task, content_hash=digest).first()
        if version is None:
            latest = task.versions.order_by("-number").first()
            number = (task.versions.aggregate(n=Max("number"))["n"] or 0) + 1
            version = TaskVersion.objects.create(
                task=task,
                content_hash=digest,
                parent=latest,
                number=number,
                prompt=record["prompt"],
                entry_point=record["entry_point"],
                reference_solution=record["reference_solution"],
                environment=env,
                test_suite=suite,
                change_note=change_note or f"imported from {source}",
            )
            report.new_versions += 1
        else:
            report.unchanged += 1
        pinned.append(version)
        report.task_ids.append(task.task_id)
    if not pinned:
        raise ImportFormatError("the file holds no task; nothing to import")
    report.tasks = len(pinned)
    task_set_pin(name=task_set_name, versions=pinned)
    return report


@transaction.atomic
def task_set_pin(*, name: str, versions: list[TaskVersion], description: str = "") -> TaskSet:
    """Create or replace the task set ``name`` so it pins exactly ``versions``, in order."""
    task_set, _ = TaskSet.objects.get_or_create(name=name)
    if description:
        task_set.description = description
    task_set.members.all().delete()
    TaskSetMember.objects.bulk_create(
        TaskSetMember(task_set=task_set, task_version=v, position=i) for i, v in enumerate(versions)
    )
    task_set.save()
    return task_set


def trivial_solution(version: TaskVersion) -> str:
    """A solution that does nothing: in Python the prompt alone (a function whose body is
    its docstring, returning None); in JavaScript the prompt with its body closed."""
    return harness(version.test_suite.harness).trivial(version.prompt)


def _verdict(reference: R.ExecutionResult, trivial: R.ExecutionResult) -> tuple[str, list[str]]:
    if reference.status == R.INFRA_ERROR:
        return TaskVersion.VERDICT_INFRA_ERROR, [f"reference run: {reference.detail}"]
    if not reference.passed:
        failing = [f"{t.id}: {t.error}" for t in reference.tests if not t.passed]
        more = [f"and {len(failing) - 3} more failing tests"] if len(failing) > 3 else []
        return TaskVersion.VERDICT_BROKEN_REFERENCE, [f"reference status {reference.status}", *failing[:3], *more]
    if trivial.status == R.INFRA_ERROR:
        return TaskVersion.VERDICT_INFRA_ERROR, [f"trivial run: {trivial.detail}"]
    if trivial.passed:
        return TaskVersion.VERDICT_TRIVIAL_PASSES, ["the prompt with an empty body passes every hidden test"]
    return TaskVersion.VERDICT_VALID, []


def task_versions_validate(*, versions: list[TaskVersion]) -> list[TaskVersion]:
    """Run the reference and a trivial solution of each version in sandboxes; store verdicts.

    Both runs of every version are queued at once for the sandbox workers. Verdicts
    are saved one small transaction each, in order.

    Returns:
        The versions, in the given order, with ``verdict`` and ``verdict_reasons`` set.
    """
    requests = []
    for version in versions:
        suite = version.test_suite
        limits = Limits(wall_timeout_s=suite.timeout_s, cpu_s=int(suite.timeout_s) + 1)
        request = harness(suite.harness).request
        for program in (version.prompt + version.reference_solution, trivial_solution(version)):
            requests.append(request(program, suite.hidden_tests, version.entry_point, prompt=version.prompt, limits=limits))
    results = run_many(requests)
    for index, version in enumerate(versions):
        verdict, reasons = _verdict(results[2 * index], results[2 * index + 1])
        now = timezone.now()
        version.verdict, version.verdict_reasons, version.validated_at = verdict, reasons, now
        TaskVersion.objects.filter(pk=version.pk).update(verdict=verdict, verdict_reasons=reasons, validated_at=now)
    return versions
