"""Helpers of the task-shape tests (MBPP's, stdin/stdout): import, validate, grade, for real."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command

from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import run_many
from sandboxes.suites import harness
from tasks_library.models import TaskVersion


def import_json(*args) -> dict:
    """``import_tasks ARGS --json``'s report."""
    out = StringIO()
    call_command("import_tasks", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def validate_rows(taskset: str, *args: str) -> dict[str, dict]:
    """``validate_tasks --taskset TASKSET ARGS --json``'s rows by task id."""
    out = StringIO()
    call_command("validate_tasks", "--taskset", taskset, *args, "--json", stdout=out)
    return {row["task_id"]: row for row in json.loads(out.getvalue())["task_versions"]}


def versions() -> dict[str, TaskVersion]:
    """Every task version by its task's id (one version each in these tests)."""
    return {v.task.task_id: v for v in TaskVersion.objects.select_related("task", "test_suite")}


def grade(version: TaskVersion, completion: str, **limits) -> R.ExecutionResult:
    """``version``'s prompt + ``completion`` graded on its hidden tests in the sandbox pool, as a
    rollout's final grade is (suite setup code included)."""
    suite = version.test_suite
    request = harness(suite.harness).request(
        version.prompt + completion,
        suite.hidden_tests,
        version.entry_point,
        prompt=version.prompt,
        limits=Limits(**{"wall_timeout_s": 20, **limits}),
        setup=suite.setup_code,
    )
    return run_many([request])[0]
