"""Trajectory replay and the trajectory lists: pages and their read-only JSON API.

Readable as the run pages are (:mod:`core.access`: anyone while ``CRUCIBLE_CONSOLE_PUBLIC``
is on, else users with a role). Thin: the reads are in
:mod:`training.selectors`; a trajectory's turns reach the page in chunks from
:class:`TrajectoryTurnsApi` (the first chunk embedded in the page) so that a
trajectory of thousands of turns opens at once.
"""

from __future__ import annotations

from django import forms
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import ListAPIView, RetrieveAPIView

from console.review.selectors import replay_with_labels, trajectory_turn_labels
from core.access import ConsoleRead, console_read_page
from core.api import LimitOffsetPagination, PageNumberPagination, int_parameter
from core.bounds import ID_MAX, REWARD_ABS_MAX, STEP_MAX
from sandboxes.result import STATUSES
from training import flags, selectors
from training.models import MonitorScore, Trajectory
from training.replay import TURN_CHUNK, TurnSerializer, replay_turns, turn_chunk

PAGE_SIZE = 50
# Flags the trainer raises itself; detectors add their own (the filter takes any name).
KNOWN_FLAGS = tuple(flags.KINDS)  # the filter's suggestions


# --- filters ------------------------------------------------------------------------


class TrajectoryFilterForm(forms.Form):
    """The filters of a trajectory list, from the query string (all optional)."""

    run = forms.IntegerField(required=False, min_value=1, max_value=ID_MAX)
    step_min = forms.IntegerField(
        required=False, min_value=0, max_value=STEP_MAX, label="step from"
    )
    step_max = forms.IntegerField(required=False, min_value=0, max_value=STEP_MAX, label="step to")
    task = forms.CharField(required=False, max_length=200, label="task id contains")
    reward_min = forms.FloatField(
        required=False, min_value=-REWARD_ABS_MAX, max_value=REWARD_ABS_MAX, label="reward from"
    )
    reward_max = forms.FloatField(
        required=False, min_value=-REWARD_ABS_MAX, max_value=REWARD_ABS_MAX, label="reward to"
    )
    flag = forms.CharField(
        required=False,
        max_length=120,
        help_text="any (flagged), none (unflagged), or a flag's name",
    )
    status = forms.ChoiceField(required=False, choices=[("", "any")] + [(s, s) for s in STATUSES])
    sort = forms.ChoiceField(required=False, choices=[(k, k) for k in selectors.TRAJECTORY_SORTS])

    def selector_kwargs(self, *, run_id: int | None = None) -> dict:
        """The keyword arguments of :func:`training.selectors.trajectory_list` (form must be valid).
        Without a sort, one run's trajectories come in step order, every run's newest first."""
        data = self.cleaned_data
        return {
            "run_id": run_id if run_id is not None else data["run"],
            "step_min": data["step_min"],
            "step_max": data["step_max"],
            "task": data["task"].strip(),
            "reward_min": data["reward_min"],
            "reward_max": data["reward_max"],
            "flag": data["flag"].strip(),
            "status": data["status"],
            "sort": data["sort"] or self.default_sort(run_id=run_id),
        }

    def default_sort(self, *, run_id: int | None = None) -> str:
        return "step" if run_id is not None or self.cleaned_data.get("run") else "newest"


def _filters(request: HttpRequest, *, run_id: int | None) -> tuple[TrajectoryFilterForm, dict]:
    form = TrajectoryFilterForm(request.GET)
    if not form.is_valid():
        return form, {}
    return form, form.selector_kwargs(run_id=run_id)


# --- serializers --------------------------------------------------------------------


class TrajectorySummarySerializer(serializers.ModelSerializer):
    task_id = serializers.CharField(source="task_version.task.task_id")
    task_version_number = serializers.IntegerField(source="task_version.number")
    turn_count = serializers.IntegerField()
    monitor_max = serializers.FloatField(allow_null=True)

    class Meta:
        model = Trajectory
        fields = [
            "id",
            "run",
            "step",
            "group",
            "index_in_group",
            "task_id",
            "task_version_number",
            "status",
            "reward",
            "reward_components",
            "advantage",
            "flags",
            "tests_passed",
            "tests_total",
            "turn_count",
            "monitor_max",
            "created_at",
        ]


class MonitorScoreSerializer(serializers.ModelSerializer):
    class Meta:
        model = MonitorScore
        fields = ["monitor", "score", "reason", "created_at"]


class OpeningSerializer(serializers.Serializer):
    system = serializers.CharField()
    user = serializers.CharField(help_text="the user prompt: the problem statement")
    tools = serializers.ListField(child=serializers.DictField(), help_text="the tools' schemas")


class TrajectoryDetailSerializer(serializers.ModelSerializer):
    task_id = serializers.CharField(source="task_version.task.task_id")
    task_version_number = serializers.IntegerField(source="task_version.number")
    monitor_scores = serializers.SerializerMethodField()
    opening = serializers.SerializerMethodField()
    grading = serializers.JSONField(
        help_text='the hidden-test grading: {"status", "tests": [{"id", "passed", "error"}]}'
    )

    class Meta:
        model = Trajectory
        fields = [
            "id",
            "run",
            "step",
            "group",
            "index_in_group",
            "task_id",
            "task_version_number",
            "status",
            "reward",
            "reward_components",
            "advantage",
            "flags",
            "flag_evidence",
            "tests_passed",
            "tests_total",
            "prompt_token_ids",
            "final_code",
            "opening",
            "grading",
            "monitor_scores",
            "created_at",
        ]

    @extend_schema_field(OpeningSerializer(allow_null=True))
    def get_opening(self, trajectory: Trajectory) -> dict | None:
        """What an agent's episode opened with (None for a completion rollout)."""
        opening = trajectory.opening
        if opening is None:
            return None
        return {"system": opening.system, "user": opening.user, "tools": opening.tools}

    @extend_schema_field(MonitorScoreSerializer(many=True))
    def get_monitor_scores(self, trajectory: Trajectory) -> list:
        scores = selectors.trajectory_monitor_scores(trajectory_id=trajectory.pk)
        return MonitorScoreSerializer(scores, many=True).data


# --- JSON API -------------------------------------------------------------------------


REWARD_SCHEMA = {"type": "number", "minimum": -REWARD_ABS_MAX, "maximum": REWARD_ABS_MAX}


class TurnPagination(LimitOffsetPagination):
    default_limit = TURN_CHUNK
    max_limit = 200


class TrajectoryPagination(PageNumberPagination):
    page_size = PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = 500


FILTER_PARAMETERS = [
    int_parameter("step_min", maximum=STEP_MAX, description="first step (inclusive)"),
    int_parameter("step_max", maximum=STEP_MAX, description="last step (inclusive)"),
    OpenApiParameter("task", str, description="a substring of the task id, case-insensitive"),
    OpenApiParameter("reward_min", REWARD_SCHEMA, description="lowest reward (inclusive)"),
    OpenApiParameter("reward_max", REWARD_SCHEMA, description="highest reward (inclusive)"),
    OpenApiParameter(
        "flag", str, description="`any` (flagged), `none` (unflagged), or a flag's name"
    ),
    OpenApiParameter(
        "status", str, enum=list(STATUSES), description="the grading execution's status"
    ),
    OpenApiParameter(
        "sort", str, enum=list(selectors.TRAJECTORY_SORTS), description="order (default `step`)"
    ),
]


class _TrajectoryListBase(ListAPIView):
    serializer_class = TrajectorySummarySerializer
    pagination_class = TrajectoryPagination
    permission_classes = [ConsoleRead]

    def run_id(self) -> int | None:
        return None

    def get_queryset(self):
        form = TrajectoryFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        return selectors.trajectory_list(**form.selector_kwargs(run_id=self.run_id()))


@extend_schema(
    tags=["trajectories"],
    summary="Trajectories of every run, filtered",
    parameters=[
        int_parameter("run", minimum=1, description="only this run's trajectories"),
        *FILTER_PARAMETERS,
    ],
)
class TrajectoryListApi(_TrajectoryListBase):
    """Trajectories across runs, filtered and sorted; a page at a time (``page``, ``page_size``)."""


@extend_schema(
    tags=["trajectories"], summary="A run's trajectories, filtered", parameters=FILTER_PARAMETERS
)
class RunTrajectoryListApi(_TrajectoryListBase):
    """One run's trajectories, filtered and sorted; a page at a time (``page``, ``page_size``)."""

    def run_id(self) -> int | None:
        run_id = self.kwargs["run_id"]
        if not selectors.run_exists(run_id=run_id):
            raise NotFound(f"run {run_id} does not exist")
        return run_id


@extend_schema(tags=["trajectories"], summary="One trajectory of a run")
class TrajectoryApi(RetrieveAPIView):
    """One trajectory: rewards, flags with their evidence, monitor scores, final code."""

    serializer_class = TrajectoryDetailSerializer
    permission_classes = [ConsoleRead]

    def get_object(self):
        try:
            trajectory = selectors.trajectory_get(
                run_id=self.kwargs["run_id"], trajectory_id=self.kwargs["pk"]
            )
        except Trajectory.DoesNotExist:
            raise NotFound(
                f"run {self.kwargs['run_id']} has no trajectory {self.kwargs['pk']}"
            ) from None
        return trajectory


@extend_schema(
    tags=["trajectories"],
    summary="A trajectory's turns, a chunk at a time (the replay reads these)",
)
class TrajectoryTurnsApi(ListAPIView):
    """A trajectory's turns in order, ``limit`` (default 25, at most 200) from ``offset``:
    the policy's text, the action, the code and its diff from the previous turn, the
    sandbox result (status, exit code, signal, stdout, stderr, truncation, timings, tests)
    and the observation shown to the policy. Token arrays are left out; their lengths are given."""

    serializer_class = TurnSerializer
    pagination_class = TurnPagination
    permission_classes = [ConsoleRead]

    def get_queryset(self):
        if not Trajectory.objects.filter(
            pk=self.kwargs["pk"], run_id=self.kwargs["run_id"]
        ).exists():
            raise NotFound(f"run {self.kwargs['run_id']} has no trajectory {self.kwargs['pk']}")
        return selectors.trajectory_turns(trajectory_id=self.kwargs["pk"])

    def list(self, request, *args, **kwargs):
        page = list(self.paginate_queryset(self.get_queryset()))
        offset = self.paginator.offset
        return self.get_paginated_response(
            turn_chunk(
                page,
                trajectory_id=self.kwargs["pk"],
                offset=offset,
                context=self.get_serializer_context(),
            )
        )


# --- pages ----------------------------------------------------------------------------


def _list_page(request: HttpRequest, *, run=None) -> HttpResponse:
    form, kwargs = _filters(request, run_id=run.pk if run else None)
    page = None
    if kwargs:
        page = Paginator(selectors.trajectory_list(**kwargs), PAGE_SIZE).get_page(
            request.GET.get("page")
        )
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    return render(
        request,
        "console/trajectory_list.html",
        {
            "run": run,
            "form": form,
            "page": page,
            "sort": kwargs.get("sort", ""),
            "query": query.urlencode(),
            "unsorted": unsorted.urlencode(),
            "known_flags": KNOWN_FLAGS,
        },
    )


@console_read_page
def trajectory_list(request: HttpRequest) -> HttpResponse:
    """Trajectories across runs (``?run=`` narrows to one), filtered, sorted, paginated."""
    return _list_page(request)


@console_read_page
def run_trajectory_list(request: HttpRequest, run_id: int) -> HttpResponse:
    """One run's trajectories, filtered, sorted, paginated."""
    run = selectors.run_list().filter(pk=run_id).first()
    if run is None:
        raise Http404(f"run {run_id} does not exist")
    return _list_page(request, run=run)


@console_read_page
def trajectory_detail(request: HttpRequest, run_id: int, trajectory_id: int) -> HttpResponse:
    """The replay of one trajectory: its header, the turn index, the first chunk of turns
    (the page's script loads the rest as they scroll into view)."""
    try:
        trajectory = selectors.trajectory_get(run_id=run_id, trajectory_id=trajectory_id)
    except Trajectory.DoesNotExist:
        raise Http404(f"run {run_id} has no trajectory {trajectory_id}") from None
    group = list(
        selectors.trajectory_group(run_id=run_id, step=trajectory.step, group=trajectory.group)
    )
    at = next(i for i, t in enumerate(group) if t.pk == trajectory.pk)
    components = sorted(trajectory.reward_components.items())
    return render(
        request,
        "console/trajectory_detail.html",
        {
            "trajectory": trajectory,
            "run": trajectory.run,
            "task": trajectory.task_version.task,
            "components": components,
            "flags": [
                (flag, flags.evidence_text(trajectory.flag_evidence.get(flag)))
                for flag in trajectory.flags
            ]
            + [
                (flag, flags.evidence_text(value))
                for flag, value in trajectory.flag_evidence.items()
                if flag not in trajectory.flags
            ],
            "monitor_scores": selectors.trajectory_monitor_rows(trajectory=trajectory),
            "group": group,
            "episode": selectors.trajectory_episode(trajectory=trajectory),
            "workspace_url": (
                reverse("task-detail", args=[trajectory.task_version.task.task_id])
                + f"?v={trajectory.task_version.number}"
                if trajectory.task_version.workspace_id
                else ""
            ),
            "previous": group[at - 1] if at > 0 else None,
            "next": group[at + 1] if at + 1 < len(group) else None,
            **replay_with_labels(
                replay_turns(trajectory=trajectory),
                trajectory_turn_labels(trajectory_id=trajectory.pk, user=request.user),
            ),
        },
    )
