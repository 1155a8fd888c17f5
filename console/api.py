"""The runs API: what the run pages do, for a pipeline or a notebook.

``GET /api/runs/`` lists runs as the runs table does (the same query parameters,
:mod:`console.run_table`); ``POST`` launches one. ``GET``/``PATCH /api/runs/<id>/`` reads a run
and renames, describes or retags it; ``POST /api/runs/<id>/cancel/`` and ``.../resume/`` cancel and
resume it. Each write is allowed to exactly whom the pages allow it
(:mod:`core.permissions`: launching needs ``may_launch_run``, the others
``may_operate_run``), through the project's authentication classes (a session or HTTP Basic;
more plug in through ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``). Errors are
``{"field": name or null, "error": "name: message"}``: 400 for bad input, 409 for a run whose
status does not allow the write, 404 for an unknown run; nothing is written on an error.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from console.launch_form import launch_config
from console.run_table import RunTableQuery, run_row, run_rows
from core.access import rule_permission
from core.api import BadRequest as ApiError
from core.api import ErrorSerializer, PageNumberPagination, paged
from core.api import validated as checked
from core.errors import InputError
from core.permissions import may_launch_run, may_operate_run
from tasks_library.models import TaskSet
from training.config import ConfigError
from training.models import TrainingRun
from training.services import InvalidTransition, run_create, run_update
from training.services import run_resume as resume

# --- serializers ------------------------------------------------------------------------------


class MetricValuesSerializer(serializers.Serializer):
    latest = serializers.FloatField(allow_null=True, help_text="at the run's newest step")
    best = serializers.FloatField(
        allow_null=True, help_text="the highest (the lowest for losses, flag rates, timings)"
    )


class RunWarningSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="tasks_dropped, no_tokens_trained or zero_advantage")
    title = serializers.CharField()
    message = serializers.CharField()


class RunRowSerializer(serializers.Serializer):
    """A run as the runs table shows it."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    launched_by = serializers.CharField(help_text="a username, or '<os user> (command line)'")
    task_set = serializers.CharField()
    status = serializers.ChoiceField(choices=TrainingRun.STATUSES)
    backend = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_s = serializers.FloatField(allow_null=True, help_text="started to finished (or now)")
    steps_done = serializers.IntegerField()
    total_steps = serializers.IntegerField()
    metrics = serializers.DictField(
        child=MetricValuesSerializer(), help_text="per metric column: its latest and best value"
    )
    warnings = RunWarningSerializer(
        many=True, help_text="what makes the run train less than asked (training/run_warnings.py)"
    )
    url = serializers.CharField(help_text="the run's page")


class RunLaunchSerializer(serializers.Serializer):
    task_set = serializers.CharField(
        help_text="the task set's name: the run trains on its trainable versions"
    )
    steps = serializers.IntegerField(min_value=1, max_value=1_000_000, help_text="GRPO steps")
    backend = serializers.ChoiceField(choices=["local", "kubernetes"], default="local")
    config = serializers.DictField(
        required=False,
        default=dict,
        help_text='run config keys (training/config.py: RunConfig), e.g. {"lr": 0.0001}',
    )
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.ListField(child=serializers.CharField(), required=False, default=list)


class RunUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False)


class RunCancelSerializer(serializers.Serializer):
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="recorded in the run's history"
    )


class RunTransitionSerializer(serializers.Serializer):
    run = RunRowSerializer()
    queued = serializers.BooleanField(help_text="the work (cancel, launch) is queued on Celery")
    message = serializers.CharField()


# --- helpers ----------------------------------------------------------------------------------


def _row(run_id: int, query: RunTableQuery | None = None) -> dict:
    query = query or RunTableQuery()
    run = query.runs().filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"run {run_id} does not exist")
    return {**run_row(run, query.metric_columns()), "url": reverse("run-detail", args=[run_id])}


def _run_or_404(run_id: int) -> TrainingRun:
    run = TrainingRun.objects.filter(pk=run_id).first()
    if run is None:
        raise ApiError(None, f"run {run_id} does not exist", status_code=404)
    return run


class RunPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


TABLE_PARAMETERS = [
    OpenApiParameter(
        "q", str, description="words in the id, name, description, tags, task set or launcher"
    ),
    OpenApiParameter("status", str, many=True, enum=[s for s, _ in TrainingRun.STATUSES]),
    OpenApiParameter("tag", str, many=True, description="the run carries every tag"),
    OpenApiParameter("launched_by", str, description="a substring of the launcher"),
    OpenApiParameter("task_set", str, description="a substring of the task set's name"),
    OpenApiParameter(
        "metric",
        str,
        many=True,
        description="metric columns (default reward/mean, reward/pass_rate, heldout/pass@1)",
    ),
    OpenApiParameter(
        "sort",
        str,
        description="id, name, status, launched_by, task_set, created, duration, steps, "
        "<metric>:latest or <metric>:best; '-' first for descending (default -id)",
    ),
    OpenApiParameter(
        "f.<column>",
        str,
        description="a range on a numeric column: >0.5, <=10, 0.2..0.8; duration in s or 15m, 2h "
        "(e.g. f.reward/mean:best=>0.5)",
    ),
]


# --- views ------------------------------------------------------------------------------------


class RunListApi(APIView):
    """``GET``: runs as the runs table lists them (same filters, sort and metric columns). ``POST``:
    launch a run (as the launch form does)."""

    permission_classes = [
        rule_permission(
            write=may_launch_run,
            message="only curators and operators (training.add_trainingrun) may launch runs",
        )
    ]

    @extend_schema(
        tags=["runs"],
        summary="Runs, as the runs table lists them",
        operation_id="runs_list",
        parameters=TABLE_PARAMETERS,
        responses={200: paged(RunRowSerializer), 400: ErrorSerializer},
    )
    def get(self, request) -> Response:
        try:
            query = RunTableQuery.from_params(request.query_params)
            runs = query.runs()
            paginator = RunPagination()
            page = paginator.paginate_queryset(runs, request, view=self)
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        columns = query.metric_columns()
        rows = [
            {**row, "url": reverse("run-detail", args=[row["id"]])}
            for row in run_rows(list(page), columns)
        ]
        return paginator.get_paginated_response(rows)

    @extend_schema(
        tags=["runs"],
        summary="Launch a run",
        description=(
            "Creates the run on the task set's trainable versions and queues its launch (Celery); "
            "the answer comes at once, the run's status then moves pending, launching, running."
        ),
        request=RunLaunchSerializer,
        responses={201: RunRowSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def post(self, request) -> Response:
        # Imported here: training.tasks loads the kubernetes client, which the web does without.
        from training.tasks import run_launch as run_launch_task  # noqa: PLC0415

        data = checked(RunLaunchSerializer, request.data)
        task_set = TaskSet.objects.filter(name=data["task_set"]).first()
        if task_set is None:
            raise ApiError("task_set", f"task_set: no task set named {data['task_set']!r}")
        try:
            config = launch_config(data["config"], steps=data["steps"], backend=data["backend"])
            run = run_create(
                task_set=task_set,
                config=config,
                backend=data["backend"],
                name=data["name"],
                description=data["description"],
                tags=data["tags"],
                launched_by=request.user.get_username(),
            )
        except ConfigError as exc:
            raise ApiError("config", str(exc)) from exc
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        except ValueError as exc:  # an empty or unvalidated task set, an unusable held-out set
            message = str(exc)
            field = "config" if message.startswith("config key") else "task_set"
            raise ApiError(field, f"{field}: {message}") from exc
        run_launch_task.delay(run.pk)
        return Response(_row(run.pk), status=status.HTTP_201_CREATED)


class RunApi(APIView):
    """``GET``: one run as the runs table shows it. ``PATCH``: its name, description or tags."""

    permission_classes = [
        rule_permission(
            write=may_operate_run,
            message="only curators and operators may rename, describe or tag runs",
        )
    ]

    @extend_schema(
        tags=["runs"],
        summary="One run",
        parameters=[OpenApiParameter("metric", OpenApiTypes.STR, many=True)],
        responses={200: RunRowSerializer, 404: ErrorSerializer},
    )
    def get(self, request, run_id: int) -> Response:
        try:
            query = RunTableQuery.from_params(request.query_params)
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        _run_or_404(run_id)
        return Response(_row(run_id, query))

    @extend_schema(
        tags=["runs"],
        summary="Rename, describe or retag a run",
        request=RunUpdateSerializer,
        responses={200: RunRowSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def patch(self, request, run_id: int) -> Response:
        data = checked(RunUpdateSerializer, request.data)
        _run_or_404(run_id)
        try:
            run_update(run_id=run_id, user=request.user, **data)
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        return Response(_row(run_id))


class RunCancelApi(APIView):
    """Cancel a run: it is recorded ``cancelled`` and its trainer stopped (queued on Celery)."""

    permission_classes = [
        rule_permission(
            write=may_operate_run, message="only curators and operators may cancel runs"
        )
    ]

    @extend_schema(
        tags=["runs"],
        summary="Cancel a run",
        request=RunCancelSerializer,
        responses={202: RunTransitionSerializer, 404: ErrorSerializer, 409: ErrorSerializer},
    )
    def post(self, request, run_id: int) -> Response:
        # Imported here: training.tasks loads the kubernetes client, which the web does without.
        from training.tasks import run_cancel_task  # noqa: PLC0415

        data = checked(RunCancelSerializer, request.data)
        run = _run_or_404(run_id)
        if run.is_terminal:
            raise ApiError(
                None,
                f"run {run_id} already ended {run.status}; there is nothing to cancel",
                status_code=409,
            )
        who = request.user.get_username()
        reason = data["reason"].strip()
        run_cancel_task.delay(
            run_id, f"cancelled by {who} through the API" + (f": {reason}" if reason else "")
        )
        return Response(
            {
                "run": _row(run_id),
                "queued": True,
                "message": (
                    f"cancelling run {run_id}: its trainer stops and its backend is cleaned up"
                ),
            },
            status=status.HTTP_202_ACCEPTED,
        )


class RunResumeApi(APIView):
    """Resume an ``interrupted`` run from its newest checkpoint (its launch is queued)."""

    permission_classes = [
        rule_permission(
            write=may_operate_run, message="only curators and operators may resume runs"
        )
    ]

    @extend_schema(
        tags=["runs"],
        summary="Resume an interrupted run",
        request=None,
        responses={202: RunTransitionSerializer, 404: ErrorSerializer, 409: ErrorSerializer},
    )
    def post(self, request, run_id: int) -> Response:
        # Imported here: training.tasks loads the kubernetes client, which the web does without.
        from training.tasks import run_launch as run_launch_task  # noqa: PLC0415

        _run_or_404(run_id)
        try:
            attempt = resume(
                run_id=run_id, reason=f"resumed by {request.user.get_username()} through the API"
            )
        except InvalidTransition as exc:
            raise ApiError(None, str(exc), status_code=409) from exc
        run_launch_task.delay(run_id)
        return Response(
            {
                "run": _row(run_id),
                "queued": True,
                "message": f"resuming run {run_id} (attempt {attempt}) from its last checkpoint",
            },
            status=status.HTTP_202_ACCEPTED,
        )
