"""The task library's REST API: list, read, diff, edit, validate, quarantine, approve, pin.

Thin: input is checked by serializers and :class:`~tasks_library.forms.FilterForm`,
then one selector or service is called. Every 400 body is ``{"field": name or null,
"error": "name: message"}``; unknown tasks, versions and task sets are 404. Reading
needs a signed-in user, writing the ``curators`` group (see
:mod:`core.permissions`); the service records ``request.user`` as the author.
"""

from __future__ import annotations

from django.db.models import Max
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from core.access import IsCuratorOrReadOnly
from core.api import (
    BadRequest,
    ErrorSerializer,
    PageNumberPagination,
    bounded_query_int,
    int_parameter,
    validated,
)
from core.bounds import ID_MAX
from core.errors import InputError
from tasks_library.difficulty import pass_rate
from tasks_library.forms import (
    TASK_SET_NAME_RULE,
    FilterForm,
    first_error,
    task_set_name_ok,
)
from tasks_library.highlight import highlighted_lines
from tasks_library.models import (
    EnvironmentVersion,
    RepositoryWorkspace,
    Task,
    TaskSet,
    TaskSetVersion,
    TaskVersion,
    TestSuiteVersion,
    ValidationJob,
)
from tasks_library.repositories import REPOSITORY_EDITABLE
from tasks_library.selectors import (
    SUMMARY_DEFERRED,
    WorkspacePathNotFound,
    repository_test_results,
    task_set_versions,
    task_sets_with_sizes,
    task_version_summaries,
    task_versions_diff,
    task_versions_light,
    trainable,
    workspace_browse,
)
from tasks_library.services import (
    EDITABLE,
    MAX_TIMEOUT_S,
    task_set_pin,
    task_version_edit,
    task_versions_approve,
    task_versions_quarantine,
)
from tasks_library.tasks import validation_job_start
from tasks_library.validation.pipeline import MUTANTS_MAX, REFERENCE_RUNS_MAX, Options

# --- errors ---------------------------------------------------------------------


def filtered(params) -> FilterForm:
    """A valid :class:`FilterForm` of ``params``. Raises BadRequest naming the bad filter."""
    form = FilterForm(params)
    if not form.is_valid():
        raise BadRequest(*first_error(form))
    return form


def _filter_parameters() -> list[OpenApiParameter]:
    params = []
    for name, field in FilterForm.base_fields.items():
        kind = OpenApiTypes.BOOL if name == "all_versions" else OpenApiTypes.STR
        enum = [value for value, _ in field.choices if value] if hasattr(field, "choices") else None
        params.append(
            OpenApiParameter(
                name, kind, enum=enum, description=field.help_text or f"filter by {name}"
            )
        )
    return params


FILTER_PARAMETERS = _filter_parameters()


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


# --- serializers ----------------------------------------------------------------


class DifficultySerializer(serializers.Serializer):
    bucket = serializers.CharField()
    mean = serializers.FloatField(
        help_text="posterior mean pass rate, Beta(1 + passed, 1 + failed)"
    )
    std = serializers.FloatField()
    attempts_passed = serializers.IntegerField()
    attempts_total = serializers.IntegerField()


class TaskVersionSummarySerializer(serializers.ModelSerializer):
    task_id = serializers.CharField(source="task.task_id")
    source = serializers.CharField(source="task.source")
    tags = serializers.ListField(child=serializers.CharField(), source="task.tags")
    version = serializers.CharField(help_text="short content hash")
    trainable = serializers.BooleanField()
    difficulty = serializers.SerializerMethodField()

    class Meta:
        model = TaskVersion
        fields = [
            "id",
            "task_id",
            "source",
            "tags",
            "number",
            "version",
            "content_hash",
            "verdict",
            "mutation_score",
            "quarantined",
            "quarantine_reason",
            "trainable",
            "difficulty",
            "author",
            "change_note",
            "created_at",
        ]

    @extend_schema_field(DifficultySerializer)
    def get_difficulty(self, version: TaskVersion) -> dict:
        rate = pass_rate(version)
        return {
            "bucket": rate.bucket,
            "mean": round(rate.mean, 4),
            "std": round(rate.std, 4),
            "attempts_passed": version.attempts_passed,
            "attempts_total": version.attempts_total,
        }


class WorkspaceSerializer(serializers.ModelSerializer):
    paths = serializers.SerializerMethodField(help_text="every file's path, sorted")

    class Meta:
        model = RepositoryWorkspace
        fields = ["digest", "file_count", "size_bytes", "paths"]

    def get_paths(self, workspace: RepositoryWorkspace) -> list[str]:
        return workspace.paths()


class TestSuiteSerializer(serializers.ModelSerializer):
    hidden_files = WorkspaceSerializer(
        allow_null=True, help_text="pytest-repo: test files added only at grading"
    )

    class Meta:
        model = TestSuiteVersion
        fields = [
            "content_hash",
            "harness",
            "visible_tests",
            "hidden_tests",
            "visible_test_ids",
            "hidden_test_ids",
            "timeout_s",
            "test_timeout_s",
            "setup_code",
            "fail_to_pass",
            "pass_to_pass",
            "hidden_files",
            "test_command",
        ]


class RepositoryTestResultSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="pytest node id")
    list = serializers.ChoiceField(choices=["FAIL_TO_PASS", "PASS_TO_PASS"])
    expected_without = serializers.CharField(help_text="the result expected without the fix")
    with_patch = serializers.CharField(help_text="last validation, reference patch applied")
    without_patch = serializers.CharField(help_text="last validation, no patch")


class EnvironmentSerializer(serializers.ModelSerializer):
    class Meta:
        model = EnvironmentVersion
        fields = ["content_hash", "name", "runtime", "packages", "image", "source_builds"]


class TaskVersionDetailSerializer(TaskVersionSummarySerializer):
    parent_number = serializers.IntegerField(source="parent.number", allow_null=True, default=None)
    test_suite = TestSuiteSerializer()
    environment = EnvironmentSerializer()
    report = serializers.JSONField(
        help_text=(
            "evidence per validation stage: reference, trivial, examples, mutation (repository "
            "tasks: reference, empty_patch, collection)"
        )
    )
    workspace = WorkspaceSerializer(
        allow_null=True, help_text="a repository task's buggy repository; null otherwise"
    )
    problem_statement = serializers.SerializerMethodField(
        help_text="a repository task's prompt; null otherwise"
    )
    reference_patch = serializers.SerializerMethodField(
        help_text="a repository task's reference solution, a unified diff; null otherwise"
    )
    test_results = serializers.SerializerMethodField(
        help_text="a repository task's ids with their last validation results; [] otherwise"
    )

    class Meta(TaskVersionSummarySerializer.Meta):
        fields = [
            *TaskVersionSummarySerializer.Meta.fields,
            "parent_number",
            "prompt",
            "entry_point",
            "reference_solution",
            "files",
            "workspace",
            "problem_statement",
            "reference_patch",
            "test_results",
            "test_suite",
            "environment",
            "verdict_reasons",
            "report",
            "validated_at",
            "override_reason",
            "curated_by",
            "curated_at",
        ]

    def get_problem_statement(self, version: TaskVersion) -> str | None:
        return version.prompt if version.is_repository else None

    def get_reference_patch(self, version: TaskVersion) -> str | None:
        return version.reference_solution if version.is_repository else None

    @extend_schema_field(RepositoryTestResultSerializer(many=True))
    def get_test_results(self, version: TaskVersion) -> list[dict]:
        return repository_test_results(version=version) if version.is_repository else []


class TaskSerializer(serializers.ModelSerializer):
    versions = TaskVersionSummarySerializer(
        many=True, source="version_list", help_text="oldest first"
    )
    latest = TaskVersionDetailSerializer(allow_null=True)

    class Meta:
        model = Task
        fields = [
            "task_id",
            "source",
            "tags",
            "licence",
            "metadata",
            "created_at",
            "versions",
            "latest",
        ]


class DiffSerializer(serializers.Serializer):
    task_id = serializers.CharField()
    old = serializers.IntegerField()
    new = serializers.IntegerField()
    changes = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text='[{"field": ..., "diff": unified diff}], empty when identical',
    )


class EditSerializer(serializers.Serializer):
    base = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=ID_MAX,
        help_text="number of the version to edit (default: the latest)",
    )
    change_note = serializers.CharField(
        max_length=500, allow_blank=True, help_text="what changed and why (required)"
    )
    prompt = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    entry_point = serializers.CharField(required=False, allow_blank=True)
    reference_solution = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False
    )
    files = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    visible_tests = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    hidden_tests = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    timeout_s = serializers.FloatField(required=False, max_value=MAX_TIMEOUT_S)
    test_timeout_s = serializers.FloatField(
        required=False,
        max_value=MAX_TIMEOUT_S,
        allow_null=True,
        help_text="seconds one test may take (python-check); null: none",
    )
    setup_code = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="trusted Python run before the tests (python-check); blank: none",
    )
    harness = serializers.CharField(required=False)
    fail_to_pass = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="repository tasks: pytest ids"
    )
    pass_to_pass = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="repository tasks: pytest ids"
    )
    test_command = serializers.CharField(
        required=False, help_text="repository tasks: pytest and its arguments"
    )
    environment = serializers.JSONField(
        required=False, help_text="{name, runtime, packages, image}"
    )


class IdsSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        min_length=1,
        max_length=10000,
        help_text="task version ids",
    )


class CurateSerializer(IdsSerializer):
    reason = serializers.CharField(max_length=2000, allow_blank=True, help_text="why (required)")


class CuratedSerializer(serializers.Serializer):
    changed = serializers.IntegerField()


class ValidateSerializer(IdsSerializer):
    reference_runs = serializers.IntegerField(
        required=False, min_value=1, max_value=REFERENCE_RUNS_MAX, help_text="default 5"
    )
    mutants = serializers.IntegerField(
        required=False, min_value=0, max_value=MUTANTS_MAX, help_text="default 30; 0: none"
    )
    weak_threshold = serializers.FloatField(
        required=False, min_value=0, max_value=1, help_text="default 0.6"
    )
    examples = serializers.BooleanField(required=False)


class EnqueuedSerializer(serializers.Serializer):
    enqueued = serializers.ListField(child=serializers.IntegerField())
    job_id = serializers.CharField(help_text="the Celery task's id")
    job = serializers.IntegerField(help_text="the validation job: follow it at status_url")
    status_url = serializers.CharField()


class ValidationResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task_id = serializers.CharField()
    number = serializers.IntegerField()
    verdict = serializers.CharField()
    quarantined = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField())
    mutation_score = serializers.FloatField(allow_null=True)


class ValidationJobSerializer(serializers.ModelSerializer):
    results = ValidationResultSerializer(many=True, help_text="one per version, once done")

    class Meta:
        model = ValidationJob
        fields = [
            "id",
            "status",
            "stage",
            "stages_done",
            "stages_total",
            "version_ids",
            "options",
            "results",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]


class TaskSetSerializer(serializers.ModelSerializer):
    size = serializers.IntegerField(help_text="pinned task versions")
    latest_version = serializers.IntegerField(allow_null=True)

    class Meta:
        model = TaskSet
        fields = ["name", "description", "size", "latest_version", "created_at", "updated_at"]


class TaskSetVersionSerializer(serializers.ModelSerializer):
    version = serializers.SerializerMethodField()
    size = serializers.SerializerMethodField()

    class Meta:
        model = TaskSetVersion
        fields = [
            "number",
            "version",
            "content_hash",
            "size",
            "author",
            "change_note",
            "created_at",
            "task_versions",
        ]

    def get_version(self, obj: TaskSetVersion) -> str:
        return obj.content_hash[:12]

    def get_size(self, obj: TaskSetVersion) -> int:
        return len(obj.task_versions)


class TaskSetDetailSerializer(TaskSetSerializer):
    pinned = TaskVersionSummarySerializer(
        many=True, help_text="the pinned task versions, in set order"
    )
    history = TaskSetVersionSerializer(
        many=True, help_text="every pinning (task set version), newest first"
    )

    class Meta(TaskSetSerializer.Meta):
        fields = [*TaskSetSerializer.Meta.fields, "pinned", "history"]


class PinSerializer(serializers.Serializer):
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    change_note = serializers.CharField(max_length=500)
    versions = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX),
        required=False,
        allow_empty=False,
        help_text="task version ids to pin, in order",
    )
    filter = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="pin what the task version list returns for these filters",
    )
    trainable_only = serializers.BooleanField(
        default=True, help_text="with filter: only trainable versions"
    )

    def validate(self, data):
        if ("versions" in data) == ("filter" in data):
            raise serializers.ValidationError(
                {"versions": "give either versions (ids) or filter, not both or neither"}
            )
        return data


# --- reads ----------------------------------------------------------------------


def _task(task_id: str) -> Task:
    return get_object_or_404(Task, task_id=task_id)


def _version(task: Task, number: int) -> TaskVersion:
    return get_object_or_404(task_versions_light(), task=task, number=number)


def _task_set_detail(name: str) -> dict:
    task_set = get_object_or_404(task_sets_with_sizes(), name=name)
    task_set.pinned = task_set_versions(task_set=task_set).defer(*SUMMARY_DEFERRED)
    task_set.history = task_set.versions.order_by("-number")
    return TaskSetDetailSerializer(task_set).data


# --- views ----------------------------------------------------------------------


class LibraryApi:
    """The task library's rule on every one of its API views: reads need a sign-in (and a role
    while the console is private), writes a curator (:class:`IsCuratorOrReadOnly`)."""

    permission_classes = [IsCuratorOrReadOnly]


class CuratorApi(LibraryApi, APIView):
    """A library view that also writes (curators only)."""


@extend_schema(
    parameters=FILTER_PARAMETERS,
    responses={200: TaskVersionSummarySerializer(many=True), 400: ErrorSerializer},
)
class TaskVersionListApi(LibraryApi, generics.ListAPIView):
    """Task versions (the latest of each task unless ``all_versions``), filtered like the task list
    page."""

    serializer_class = TaskVersionSummarySerializer
    pagination_class = Pagination

    def get_queryset(self):
        return filtered(self.request.query_params).versions()


class TaskApi(LibraryApi, APIView):
    """One task: its versions (oldest first) and its latest version in full."""

    @extend_schema(responses={200: TaskSerializer})
    def get(self, request, task_id: str) -> Response:
        task = _task(task_id)
        task.version_list = list(task_version_summaries(task=task))
        task.latest = _version(task, task.version_list[-1].number) if task.version_list else None
        return Response(TaskSerializer(task).data)


class TaskVersionsApi(CuratorApi):
    """GET a task's versions; POST an edit, which creates a new version (201)."""

    @extend_schema(
        description="A task's versions, oldest first.",
        responses={200: TaskVersionSummarySerializer(many=True)},
    )
    def get(self, request, task_id: str) -> Response:
        return Response(
            TaskVersionSummarySerializer(
                task_version_summaries(task=_task(task_id)), many=True
            ).data
        )

    @extend_schema(
        description=(
            "Edit: a new version of the task with these fields changed (from ``base``, default "
            "the latest). Curators only; the new version is pending validation."
        ),
        request=EditSerializer,
        responses={201: TaskVersionDetailSerializer, 400: ErrorSerializer},
    )
    def post(self, request, task_id: str) -> Response:
        task = _task(task_id)
        data = validated(EditSerializer, request.data)
        base = _version(
            task, data.get("base") or task.versions.aggregate(n=Max("number"))["n"] or 0
        )
        editable = REPOSITORY_EDITABLE if base.is_repository else EDITABLE
        changes = {k: v for k, v in data.items() if k not in ("base", "change_note")}
        refused = sorted(set(changes) - set(editable))
        if refused:
            kind = "a repository task" if base.is_repository else "a function task"
            raise BadRequest(
                refused[0],
                f"{refused[0]}: not editable on {kind} (editable: {', '.join(editable)})",
            )
        try:
            new = task_version_edit(
                version=base,
                author=request.user.get_username(),
                change_note=data["change_note"],
                **changes,
            )
        except InputError as exc:
            raise BadRequest(exc.field, str(exc)) from exc
        return Response(
            TaskVersionDetailSerializer(_version(task, new.number)).data,
            status=status.HTTP_201_CREATED,
        )


class TaskVersionApi(LibraryApi, APIView):
    """One version in full: content, test suite, environment, verdict and report."""

    @extend_schema(responses={200: TaskVersionDetailSerializer})
    def get(self, request, task_id: str, number: int) -> Response:
        return Response(TaskVersionDetailSerializer(_version(_task(task_id), number)).data)


class WorkspaceEntrySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["dir", "file"])
    path = serializers.CharField(help_text="'' is the root")
    dirs = serializers.ListField(
        child=serializers.JSONField(), required=False, help_text="[name, path, files under it]"
    )
    files = serializers.ListField(
        child=serializers.JSONField(), required=False, help_text="[name, path, size in bytes]"
    )
    size = serializers.IntegerField(required=False, help_text="a file's bytes")
    text = serializers.CharField(
        required=False, allow_null=True, help_text="a file's text (null: not UTF-8)"
    )
    truncated = serializers.BooleanField(required=False, help_text="only the start is in text")
    lines = serializers.ListField(
        required=False,
        help_text="with ?highlight=1, a text file's lines: [[css class, text], ...] each "
        "(Pygments' short token classes)",
    )


class WorkspaceFilesApi(LibraryApi, APIView):
    """A repository task version's workspace: a directory's entries, or a file's text
    (``?path=``; the root when absent), with ``?highlight=1`` its lines as highlighted tokens. 404
    for a function task or a path that is not there."""

    @extend_schema(
        parameters=[
            OpenApiParameter("path", OpenApiTypes.STR, description="file or directory"),
            OpenApiParameter(
                "highlight", OpenApiTypes.BOOL, description="a text file's lines as tokens"
            ),
        ],
        responses={200: WorkspaceEntrySerializer, 404: ErrorSerializer},
    )
    def get(self, request, task_id: str, number: int) -> Response:
        version = _version(_task(task_id), number)
        if not version.is_repository:
            raise NotFound(f"{task_id} v{number} is not a repository task: it has no workspace")
        try:
            entry = workspace_browse(
                workspace=version.workspace, path=request.query_params.get("path", "")
            )
        except WorkspacePathNotFound as exc:
            raise NotFound(str(exc)) from exc
        entry.pop("crumbs")
        highlight = request.query_params.get("highlight", "") in ("1", "true")
        if highlight and entry["kind"] == "file" and entry["text"] is not None:
            entry["lines"] = highlighted_lines(entry["path"], entry["text"])
        return Response(entry)


class TaskDiffApi(LibraryApi, APIView):
    """The fields that differ between versions ``old`` and ``new`` of a task, as unified diffs."""

    @extend_schema(
        parameters=[
            int_parameter("old", minimum=1, required=True),
            int_parameter("new", minimum=1, required=True),
        ],
        responses={200: DiffSerializer, 400: ErrorSerializer},
    )
    def get(self, request, task_id: str) -> Response:
        task = _task(task_id)
        numbers = {}
        for name in ("old", "new"):
            if not request.query_params.get(name):
                raise BadRequest(name, f"{name}: give a version number, e.g. ?old=1&new=2")
            numbers[name] = bounded_query_int(request, name, minimum=1, maximum=ID_MAX, default=1)
        old, new = _version(task, numbers["old"]), _version(task, numbers["new"])
        return Response(
            {"task_id": task.task_id, **numbers, "changes": task_versions_diff(old=old, new=new)}
        )


def _existing_ids(ids: list[int]) -> list[int]:
    found = set(TaskVersion.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        raise BadRequest("ids", f"ids: no task version with id {missing[0]}")
    return list(dict.fromkeys(ids))


class CurateApi(CuratorApi):
    """A bulk curation action on task versions, with a written reason."""

    service = None

    @extend_schema(
        request=CurateSerializer, responses={200: CuratedSerializer, 400: ErrorSerializer}
    )
    def post(self, request) -> Response:
        data = validated(CurateSerializer, request.data)
        ids = _existing_ids(data["ids"])
        try:
            changed = self.service(
                version_ids=ids, author=request.user.get_username(), reason=data["reason"]
            )
        except InputError as exc:
            raise BadRequest(exc.field, str(exc)) from exc
        return Response({"changed": changed})


class QuarantineApi(CurateApi):
    """Quarantine task versions so training never samples them; ``reason`` is required."""

    service = staticmethod(task_versions_quarantine)


class ApproveApi(CurateApi):
    """Lift the quarantine of validated task versions (a curator's override); ``reason`` is
    required."""

    service = staticmethod(task_versions_approve)


class ValidateApi(CuratorApi):
    """Enqueue validation of task versions in the sandbox pool (Celery); 202 at once with the
    validation job to follow (``status_url``)."""

    @extend_schema(
        request=ValidateSerializer,
        responses={202: EnqueuedSerializer, 400: ErrorSerializer, 503: ErrorSerializer},
    )
    def post(self, request) -> Response:
        data = dict(validated(ValidateSerializer, request.data))
        ids = _existing_ids(data.pop("ids"))
        try:
            Options(**data).check()
        except InputError as exc:
            raise BadRequest(exc.field, f"{exc.field}: {exc}") from exc
        job = validation_job_start(
            version_ids=ids, options=data, author=request.user.get_username()
        )
        if job.status == ValidationJob.FAILED:
            return Response({"field": None, "error": job.error}, status=503)
        return Response(
            {
                "enqueued": ids,
                "job_id": job.celery_id,
                "job": job.pk,
                "status_url": reverse("api-validation-job", args=[job.pk]),
            },
            status=status.HTTP_202_ACCEPTED,
        )


class ValidationJobApi(LibraryApi, APIView):
    """A validation job: its status (queued, running, done, failed), the stage it runs, and each
    version's verdict once done. Pages poll it to show progress without a reload."""

    @extend_schema(responses={200: ValidationJobSerializer})
    def get(self, request, job_id: int) -> Response:
        return Response(ValidationJobSerializer(get_object_or_404(ValidationJob, pk=job_id)).data)


@extend_schema(responses={200: TaskSetSerializer(many=True)})
class TaskSetListApi(LibraryApi, generics.ListAPIView):
    """Task sets by name, with their size and latest version number."""

    serializer_class = TaskSetSerializer
    pagination_class = Pagination

    def get_queryset(self):
        return task_sets_with_sizes()


class TaskSetApi(LibraryApi, APIView):
    """One task set: its pinned versions in order and its version history."""

    @extend_schema(responses={200: TaskSetDetailSerializer})
    def get(self, request, name: str) -> Response:
        return Response(_task_set_detail(name))


class TaskSetPinApi(CuratorApi):
    """Create task set ``name`` or re-pin it: to given version ids, or to what a filter returns."""

    @extend_schema(
        request=PinSerializer,
        responses={
            200: TaskSetDetailSerializer,
            201: TaskSetDetailSerializer,
            400: ErrorSerializer,
        },
    )
    def post(self, request, name: str) -> Response:
        if not task_set_name_ok(name):
            raise BadRequest("name", f"name: {TASK_SET_NAME_RULE}")
        data = validated(PinSerializer, request.data)
        if "versions" in data:
            ids = _existing_ids(data["versions"])
            by_id = TaskVersion.objects.select_related("task").in_bulk(ids)
            versions = [by_id[i] for i in ids]
        else:
            form = FilterForm(data["filter"])
            if not form.is_valid():
                field, error = first_error(form)
                raise BadRequest(f"filter.{field}", f"filter.{error}")
            chosen = form.versions()
            versions = list(trainable(chosen) if data["trainable_only"] else chosen)
            if not versions:
                raise BadRequest("filter", "filter: no task version matches; nothing to pin")
        created = not TaskSet.objects.filter(name=name).exists()
        task_set_pin(
            name=name,
            versions=versions,
            description=data.get("description", ""),
            author=request.user.get_username(),
            change_note=data["change_note"],
        )
        return Response(
            _task_set_detail(name),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
