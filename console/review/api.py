"""The review API: what the review pages do, for a pipeline or a notebook.

``GET``/``POST /api/review/queues/`` lists queues and creates one (sampled and assigned at once);
``GET /api/review/queues/<id>/`` reads one with its items, their labels and decisions;
``POST /api/review/items/<id>/label/`` labels an item (its assigned reviewers) and
``.../confirm/`` decides one (curators). The rules are the pages': the services check who may
(:mod:`console.review.services`, :mod:`core.permissions`) and answer 403; bad input is
400 ``{"field", "error"}`` and writes nothing; an unknown queue or item is 404.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from console.review import models as m
from console.review import selectors, services
from core.access import rule_permission
from core.api import BadRequest as ApiError
from core.api import ErrorSerializer
from core.api import validated as checked
from core.bounds import ID_MAX, SEED_MAX, TURN_MAX
from core.errors import InputError
from core.permissions import is_curator, may_manage_queues, may_read_library, may_review


class LabelSetEntrySerializer(serializers.Serializer):
    value = serializers.CharField(help_text="1-20 lower-case letters, digits or _")
    title = serializers.CharField(required=False, help_text="as the buttons show it")


class QueueCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    run = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=ID_MAX,
        help_text="a run's id; null: every run",
    )
    strategy = serializers.ChoiceField(choices=m.STRATEGIES)
    size = serializers.IntegerField(
        min_value=1,
        max_value=services.MAX_QUEUE_SIZE,
        help_text=f"1..{services.MAX_QUEUE_SIZE} items",
    )
    reviewers_per_item = serializers.IntegerField(
        default=1, min_value=1, max_value=services.MAX_REVIEWERS
    )
    reviewers = serializers.ListField(child=serializers.CharField(), help_text="usernames")
    seed = serializers.IntegerField(default=0, min_value=0, max_value=SEED_MAX)
    filters = serializers.DictField(
        required=False,
        default=dict,
        help_text=f"narrow the candidates: {', '.join(services.FILTER_KEYS)}",
    )
    labels = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        default=list,
        help_text='the label set: values or {"value", "title"}, 2 to 9 (default the built-in five)',
    )
    consensus = serializers.ChoiceField(choices=m.CONSENSUS_RULES, default=m.QUORUM)
    quorum = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=services.MAX_REVIEWERS,
        default=None,
        help_text="reviewers who must agree; null: 2, or a curator when each item has one reviewer",
    )


class QueueSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    run = serializers.IntegerField(source="run_id", allow_null=True)
    strategy = serializers.CharField()
    size = serializers.IntegerField()
    reviewers_per_item = serializers.IntegerField()
    labels = LabelSetEntrySerializer(many=True, source="label_set")
    consensus = serializers.CharField()
    quorum = serializers.IntegerField()
    rule = serializers.CharField(source="consensus_text", help_text="the consensus rule in words")
    created_at = serializers.DateTimeField()


class ItemLabelSerializer(serializers.Serializer):
    reviewer = serializers.CharField()
    done = serializers.BooleanField()
    label = serializers.CharField(allow_blank=True)


class ItemSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    position = serializers.IntegerField()
    trajectory = serializers.IntegerField(source="trajectory_id")
    reason = serializers.CharField(help_text="why the sampling strategy picked it")
    reviewers = ItemLabelSerializer(many=True, source="rows")
    decision = serializers.CharField(allow_blank=True, help_text="'' until the rule decides")
    decided_how = serializers.CharField(allow_blank=True, help_text="quorum or curator")
    feedback = serializers.DictField(help_text="what the decision fed back")


class QueueDetailSerializer(QueueSerializer):
    items = ItemSerializer(many=True)


class ConfirmRequestSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="a value of the queue's label set")
    note = serializers.CharField(required=False, allow_blank=True, default="")


class LabelRequestSerializer(ConfirmRequestSerializer):
    turn = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=TURN_MAX - 1,
        help_text="the turn the label points at: its index, from 0 (the replay shows index + 1); "
        "null for the whole trajectory",
    )


class LabelResponseSerializer(serializers.Serializer):
    item = serializers.IntegerField()
    label = serializers.CharField()
    note = serializers.CharField()
    turn = serializers.IntegerField(allow_null=True, required=False)
    decision = serializers.CharField(allow_blank=True)
    feedback = serializers.DictField()


def _detail(queue_id: int) -> dict:
    queue = get_object_or_404(selectors.review_queues(), pk=queue_id)
    queue.items_list = selectors.review_queue_items(queue_id=queue.pk)
    data = QueueSerializer(queue).data
    data["items"] = ItemSerializer(queue.items_list, many=True).data
    return data


def _signed_in_reader(user, run_id=None) -> bool:
    """The review pages' read rule: signed in always, with a role while the console is
    private."""
    return may_read_library(user)


class QueueListApi(APIView):
    """``GET``: every queue, newest first. ``POST``: sample a queue and assign its items
    (curators and operators)."""

    permission_classes = [
        rule_permission(
            read=_signed_in_reader,
            write=may_manage_queues,
            message="only curators and operators may create review queues",
        )
    ]

    @extend_schema(
        tags=["review"], summary="Review queues", responses={200: QueueSerializer(many=True)}
    )
    def get(self, request) -> Response:
        return Response(QueueSerializer(selectors.review_queues()[:500], many=True).data)

    @extend_schema(
        tags=["review"],
        summary="Create a review queue",
        request=QueueCreateSerializer,
        responses={201: QueueDetailSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def post(self, request) -> Response:
        data = checked(QueueCreateSerializer, request.data)
        users = {
            u.get_username(): u
            for u in get_user_model().objects.filter(username__in=data["reviewers"])
        }
        missing = [name for name in data["reviewers"] if name not in users]
        if missing:
            raise ApiError("reviewers", f"reviewers: no user named {missing[0]!r}")
        try:
            queue = services.review_queue_create(
                name=data["name"],
                run_id=data["run"],
                strategy=data["strategy"],
                size=data["size"],
                reviewers_per_item=data["reviewers_per_item"],
                reviewers=[users[name] for name in data["reviewers"]],
                created_by=request.user,
                seed=data["seed"],
                filters=data["filters"],
                labels=data["labels"],
                consensus=data["consensus"],
                quorum=data["quorum"],
            )
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        return Response(_detail(queue.pk), status=status.HTTP_201_CREATED)


class QueueApi(APIView):
    """One queue with its items, their reviewers' labels and what the consensus rule decided."""

    permission_classes = [
        rule_permission(read=_signed_in_reader, write=is_curator, message="read only")
    ]

    @extend_schema(
        tags=["review"], summary="One review queue", responses={200: QueueDetailSerializer}
    )
    def get(self, request, queue_id: int) -> Response:
        return Response(_detail(queue_id))


def _answer(item: m.ReviewItem, *, label: str, note: str) -> Response:
    """A label's or a confirmation's answer: what was said and what the item's rule decided."""
    return Response(
        {
            "item": item.pk,
            "label": label,
            "note": note,
            "decision": item.decision,
            "feedback": item.feedback,
        }
    )


class _ItemWriteApi(APIView):
    """Writes on an item: the role is checked first (403), then the service's own rule (an
    assigned reviewer, 403 too)."""

    def item(self, item_id: int) -> m.ReviewItem:
        return get_object_or_404(m.ReviewItem, pk=item_id)


class ItemLabelApi(_ItemWriteApi):
    """Label an item: its assigned reviewers only. The queue's consensus rule then decides whether
    the labels feed back (the answer says what it decided)."""

    permission_classes = [
        rule_permission(
            write=may_review,
            read=_signed_in_reader,
            message="only reviewers and curators label review items",
        )
    ]

    @extend_schema(
        tags=["review"],
        summary="Label a review item",
        request=LabelRequestSerializer,
        responses={200: LabelResponseSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def post(self, request, item_id: int) -> Response:
        item = self.item(item_id)
        data = checked(LabelRequestSerializer, request.data)
        try:
            record = services.review_label(
                item_id=item.pk,
                reviewer=request.user,
                label=data["label"],
                note=data["note"],
                turn=data["turn"],
            )
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        item.refresh_from_db()
        answer = _answer(item, label=record.label, note=record.note)
        answer.data["turn"] = record.turn
        return answer


class ItemConfirmApi(_ItemWriteApi):
    """Decide an item as a curator: the label feeds back whatever the reviewers' count."""

    permission_classes = [
        rule_permission(
            write=is_curator, read=_signed_in_reader, message="only curators confirm review labels"
        )
    ]

    @extend_schema(
        tags=["review"],
        summary="Confirm a review item's label (curators)",
        request=ConfirmRequestSerializer,
        responses={200: LabelResponseSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def post(self, request, item_id: int) -> Response:
        item = self.item(item_id)
        data = checked(ConfirmRequestSerializer, request.data)
        try:
            item = services.review_item_confirm(
                item_id=item.pk, curator=request.user, label=data["label"], note=data["note"]
            )
        except InputError as exc:
            raise ApiError(exc.field, str(exc)) from exc
        return _answer(item, label=item.decision, note=item.confirm_note)
