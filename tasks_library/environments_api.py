"""The environments API: list, create, read, edit (a new version, optionally moving the tasks
that use the old one and re-validating them), build (a Celery job; follow ``build_status`` and
``build_log`` on the environment). Reads need a sign-in, writes a curator; errors are
``{"field", "error"}``.

* ``GET``/``POST /api/environments/``: every environment version with its build and usage;
  create one;
* ``GET /api/environments/<id>/``: one, with what was installed, its log and the task versions
  using it;
* ``POST /api/environments/<id>/versions/``: a new version of it (``move``: its tasks follow,
  re-validated);
* ``POST /api/environments/<id>/build/``: build it (202; poll the environment).
"""

from __future__ import annotations

from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.access import IsCuratorOrReadOnly
from core.api import BadRequest, ErrorSerializer, validated
from core.errors import InputError
from tasks_library.environments import environment_create, environment_move
from tasks_library.models import EnvironmentVersion, TaskVersion
from tasks_library.tasks import environment_build_start, validation_job_start


def environments_with_usage():
    """Every environment version, newest first, with ``task_versions``: how many use it."""
    return EnvironmentVersion.objects.annotate(task_versions=Count("taskversion")).order_by(
        "name", "-created_at", "-pk"
    )


class EnvironmentSummarySerializer(serializers.ModelSerializer):
    task_versions = serializers.IntegerField(read_only=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = EnvironmentVersion
        fields = [
            "id",
            "content_hash",
            "name",
            "runtime",
            "packages",
            "image",
            "source_builds",
            "debian_packages",
            "parent",
            "change_note",
            "author",
            "created_at",
            "build_status",
            "build_key",
            "build_error",
            "size_bytes",
            "build_seconds",
            "built_at",
            "task_versions",
            "url",
        ]

    def get_url(self, env: EnvironmentVersion) -> str:
        return reverse("api-environment", args=[env.pk])


class EnvironmentDetailSerializer(EnvironmentSummarySerializer):
    used_by = serializers.SerializerMethodField()

    class Meta(EnvironmentSummarySerializer.Meta):
        fields = [*EnvironmentSummarySerializer.Meta.fields, "resolved_packages", "build_log"]
        fields.append("used_by")

    def get_used_by(self, env: EnvironmentVersion) -> list[dict]:
        return [
            {"task_id": v.task.task_id, "number": v.number, "verdict": v.verdict}
            for v in TaskVersion.objects.filter(environment=env)
            .select_related("task")
            .order_by("task__sort_key", "number")
        ]


class EnvironmentWriteSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True)
    runtime = serializers.CharField()
    packages = serializers.ListField(child=serializers.CharField(allow_blank=True), default=list)
    image = serializers.CharField(required=False, allow_blank=True, default="")
    source_builds = serializers.BooleanField(
        default=False,
        help_text="packages without a wheel may be built from their sdists, in a build sandbox "
        "(network: the package registry only); false: wheels only",
    )
    debian_packages = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        default=list,
        help_text="Debian packages installed into a python3.13 environment's Debian root "
        "(NAME or NAME=VERSION), built in a user namespace",
    )
    change_note = serializers.CharField(required=False, allow_blank=True, default="")


class EnvironmentEditSerializer(EnvironmentWriteSerializer):
    move = serializers.BooleanField(
        default=False,
        help_text="give every task whose newest version uses this environment a new version in "
        "the new one, and validate those",
    )


def _one(environment_id: int) -> EnvironmentVersion:
    return get_object_or_404(environments_with_usage(), pk=environment_id)


class EnvironmentListApi(APIView):
    permission_classes = [IsCuratorOrReadOnly]

    @extend_schema(responses={200: EnvironmentSummarySerializer(many=True)})
    def get(self, request) -> Response:
        return Response(EnvironmentSummarySerializer(environments_with_usage(), many=True).data)

    @extend_schema(
        request=EnvironmentWriteSerializer,
        responses={201: EnvironmentDetailSerializer, 400: ErrorSerializer},
    )
    def post(self, request) -> Response:
        data = validated(EnvironmentWriteSerializer, request.data)
        try:
            env = environment_create(
                name=data.get("name", ""),
                runtime=data["runtime"],
                packages=data["packages"],
                image=data["image"],
                source_builds=data["source_builds"],
                debian_packages=data["debian_packages"],
                change_note=data["change_note"],
                author=request.user.get_username(),
            )
        except InputError as exc:
            raise BadRequest(exc.field, str(exc)) from exc
        return Response(EnvironmentDetailSerializer(_one(env.pk)).data, status=201)


class EnvironmentApi(APIView):
    permission_classes = [IsCuratorOrReadOnly]

    @extend_schema(responses={200: EnvironmentDetailSerializer})
    def get(self, request, environment_id: int) -> Response:
        return Response(EnvironmentDetailSerializer(_one(environment_id)).data)


class EnvironmentVersionsApi(APIView):
    permission_classes = [IsCuratorOrReadOnly]

    @extend_schema(
        request=EnvironmentEditSerializer,
        responses={201: EnvironmentDetailSerializer, 400: ErrorSerializer},
    )
    def post(self, request, environment_id: int) -> Response:
        old = _one(environment_id)
        data = validated(EnvironmentEditSerializer, request.data)
        author = request.user.get_username()
        try:
            new = environment_create(
                name=data.get("name") or old.name,
                runtime=data["runtime"],
                packages=data["packages"],
                image=data["image"],
                source_builds=data["source_builds"],
                debian_packages=data["debian_packages"],
                change_note=data["change_note"],
                author=author,
                parent=old,
            )
            moved = (
                environment_move(old=old, new=new, author=author, change_note=data["change_note"])
                if data["move"]
                else []
            )
        except InputError as exc:
            raise BadRequest(exc.field, str(exc)) from exc
        body = dict(EnvironmentDetailSerializer(_one(new.pk)).data)
        body["moved"] = [{"task_id": v.task.task_id, "number": v.number} for v in moved]
        if moved:
            job = validation_job_start(version_ids=[v.pk for v in moved], options={}, author=author)
            body["validation_job"] = reverse("api-validation-job", args=[job.pk])
        return Response(body, status=201)


class EnvironmentBuildApi(APIView):
    permission_classes = [IsCuratorOrReadOnly]

    @extend_schema(request=None, responses={202: EnvironmentDetailSerializer, 503: ErrorSerializer})
    def post(self, request, environment_id: int) -> Response:
        env = environment_build_start(environment=_one(environment_id))
        if env.build_status == EnvironmentVersion.BUILD_FAILED:
            return Response({"field": None, "error": env.build_error}, status=503)
        return Response(
            EnvironmentDetailSerializer(_one(env.pk)).data, status=status.HTTP_202_ACCEPTED
        )
