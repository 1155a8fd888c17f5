"""Every number a user sends has an upper bound that a real use needs and no more, refused with a
400 (or a command error) naming the field and the bound: the API's request bodies and parameters
(read from the OpenAPI schema), every Django form, every management command's options, every
numeric key of a run's configuration, and the validation job on the Celery worker."""

from __future__ import annotations

import importlib
import math
from io import StringIO

import pytest
from django import forms
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.urls import get_resolver
from drf_spectacular.generators import SchemaGenerator

from core.bounds import bounded
from tasks_library.models import ValidationJob
from tasks_library.services import validation_job_create
from tasks_library.tasks import validate_task_versions
from tests.tasks_library.conftest import client_for, curator, library, roles  # noqa: F401
from training.config import MAXIMA, RunConfig

APPS = ("console", "tasks_library", "training", "sandboxes")


def _unbounded(schema: dict, where: str, components: dict, seen=frozenset()):
    """Paths of numbers without a ``maximum`` in an OpenAPI schema (following $refs)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            yield from _unbounded(components[name], where, components, seen | {name})
        return
    for key in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(key, []):
            yield from _unbounded(sub, where, components, seen)
    if schema.get("type") in ("integer", "number") and "maximum" not in schema:
        yield where
    for name, sub in schema.get("properties", {}).items():
        yield from _unbounded(sub, f"{where}.{name}", components, seen)
    if isinstance(schema.get("items"), dict):
        yield from _unbounded(schema["items"], f"{where}[]", components, seen)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _unbounded(schema["additionalProperties"], f"{where}{{}}", components, seen)


def test_every_numeric_input_of_the_api_has_a_maximum():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    missing, seen_inputs = [], 0
    for url, operations in schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                seen_inputs += 1
                where = f"{method.upper()} {url} {parameter['in']} {parameter['name']}"
                missing += _unbounded(parameter.get("schema", {}), where, components)
            for content in operation.get("requestBody", {}).get("content", {}).values():
                seen_inputs += 1
                where = f"{method.upper()} {url} body"
                missing += _unbounded(content.get("schema", {}), where, components)
    assert seen_inputs > 50
    assert not missing, missing


def _project_forms():
    get_resolver().url_patterns  # noqa: B018 (imports every view module, and so every form)
    for module in ("console.review.forms", "tasks_library.forms"):
        importlib.import_module(module)
    todo, found = [forms.Form], []
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] in APPS:
                found.append(sub)
    return found


def test_every_numeric_field_of_every_form_has_a_maximum():
    found = _project_forms()
    assert len(found) > 8, found
    missing = [
        f"{form.__module__}.{form.__name__}.{name}"
        for form in found
        for name, field in form.base_fields.items()
        if isinstance(field, (forms.IntegerField, forms.FloatField, forms.DecimalField))
        and field.max_value is None
    ]
    assert not missing, missing


def test_every_numeric_option_of_every_command_is_bounded():
    ours = {name: app for name, app in get_commands().items() if app.split(".")[0] in APPS}
    assert len(ours) > 8, ours
    missing = []
    for name, app in ours.items():
        parser = load_command_class(app, name).create_parser("manage.py", name)
        for action in parser._actions:
            if action.type in (int, float) and not action.choices:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
            elif action.type is not None and hasattr(action.type, "maximum"):
                assert math.isfinite(action.type.maximum)
    assert not missing, missing


def test_every_numeric_key_of_a_run_config_has_a_maximum():
    numeric = {
        key
        for key, value in RunConfig().to_dict().items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    assert numeric - set(MAXIMA) == set()
    with pytest.raises(ValueError, match=r"'group_size' must be at most 1024, got 100000000000"):
        RunConfig.from_dict({"group_size": 10**11})
    with pytest.raises(ValueError, match=r"'lr' must be at most 10"):
        RunConfig.from_dict({"lr": float("inf")})


def test_bounded_refuses_outside_and_text():
    parse = bounded(1, 50)
    assert parse("50") == 50
    for raw in ("51", "0", "99999999999999999999", "x"):
        with pytest.raises(Exception, match="must be an integer from 1 to 50"):
            parse(raw)
    with pytest.raises(Exception, match="a number from 0.0 to 1.0"):
        bounded(0.0, 1.0, float)("nan")


@pytest.mark.django_db
def test_validate_api_refuses_a_huge_reference_runs_and_queues_nothing(library, curator):
    client = client_for(curator)
    ids = [v.pk for v in library]
    for field, value, bound in [
        ("reference_runs", 99999999999999999999, "50"),
        ("mutants", 10**9, "500"),
        ("weak_threshold", 7, "1"),
    ]:
        response = client.post(
            "/api/task-versions/validate/", {"ids": ids, field: value}, format="json"
        )
        assert response.status_code == 400, response.content
        body = response.json()
        assert body["field"] == field and bound in body["error"], body
    assert ValidationJob.objects.count() == 0


@pytest.mark.django_db
def test_the_worker_refuses_a_huge_option_queued_before_the_bound(library, curator):
    """A message already in the broker (queued before the API checked, or by hand) fails its job
    with the reason instead of planning 10**20 executions."""
    job = validation_job_create(
        version_ids=[library[0].pk], options={"reference_runs": 10**20}, author="cora"
    )
    with pytest.raises(ValueError, match="reference_runs must be from 1 to 50"):
        validate_task_versions.run([library[0].pk], job.options, job.pk)
    job.refresh_from_db()
    assert job.status == ValidationJob.FAILED and "reference_runs" in job.error


@pytest.mark.django_db
def test_validate_command_refuses_a_huge_reference_runs():
    with pytest.raises(CommandError, match="--reference-runs: must be an integer from 1 to 50"):
        call_command(
            "validate_tasks", "--reference-runs", "99999999999999999999", stdout=StringIO()
        )


@pytest.mark.django_db
def test_launch_api_refuses_a_huge_group_size(library, curator):
    response = client_for(curator).post(
        "/api/runs/",
        {"task_set": "lib", "steps": 2, "config": {"group_size": 10**20}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "config" and "at most 1024" in response.json()["error"]
