"""Reads of the human review: queues and progress, items, labels, and the summaries built on
them."""

from __future__ import annotations

from collections import Counter, defaultdict

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet

from console.review import models as m
from console.review.agreement import agreement, majority, verifier_pass, verifier_precision_recall
from core.permissions import CURATORS, may_review


def review_queues() -> QuerySet[m.ReviewQueue]:
    """Every queue, newest first, with ``item_count``, ``assigned_count`` and ``done_count``
    (assignments)."""
    return m.ReviewQueue.objects.select_related("run", "created_by").annotate(
        item_count=Count("items", distinct=True),
        assigned_count=Count("items__assignments", distinct=True),
        done_count=Count(
            "items__assignments",
            filter=Q(items__assignments__completed_at__isnull=False),
            distinct=True,
        ),
    )


def review_queues_of(*, user) -> QuerySet[m.ReviewQueue]:
    """The queues with an item assigned to ``user``, with ``my_assigned`` and ``my_done`` counts."""
    mine = Q(items__assignments__reviewer=user)
    return (
        m.ReviewQueue.objects.filter(mine)
        .select_related("run")
        .annotate(
            my_assigned=Count("items__assignments", filter=mine, distinct=True),
            my_done=Count(
                "items__assignments",
                filter=mine & Q(items__assignments__completed_at__isnull=False),
                distinct=True,
            ),
        )
        .order_by("-id")
    )


def review_queue_progress(*, queue_id: int) -> list[dict]:
    """Per reviewer of a queue: ``{"reviewer", "assigned", "done"}``, by username."""
    rows = (
        m.ReviewAssignment.objects.filter(item__queue_id=queue_id)
        .values("reviewer__username")
        .annotate(assigned=Count("id"), done=Count("id", filter=Q(completed_at__isnull=False)))
        .order_by("reviewer__username")
    )
    return [
        {"reviewer": r["reviewer__username"], "assigned": r["assigned"], "done": r["done"]}
        for r in rows
    ]


def review_queue_items(*, queue_id: int) -> list[m.ReviewItem]:
    """A queue's items in order, each with ``trajectory`` (and its task) loaded and ``rows``: one
    ``{"reviewer", "done", "label"}`` per assignment."""
    items = list(
        m.ReviewItem.objects.filter(queue_id=queue_id)
        .select_related("trajectory__task_version__task")
        .defer(
            "trajectory__final_code",
            "trajectory__prompt_token_ids",
            "trajectory__flag_evidence",
            "trajectory__task_version__prompt",
            "trajectory__task_version__reference_solution",
            "trajectory__task_version__report",
            "trajectory__task_version__files",
        )
        .order_by("position")
    )
    labels = {
        (lab.item_id, lab.reviewer_id): lab.label
        for lab in m.ReviewLabel.objects.filter(item__queue_id=queue_id).only(
            "item_id", "reviewer_id", "label"
        )
    }
    assignments = defaultdict(list)
    for a in (
        m.ReviewAssignment.objects.filter(item__queue_id=queue_id)
        .select_related("reviewer")
        .order_by("id")
    ):
        assignments[a.item_id].append(
            {
                "reviewer": a.reviewer.get_username(),
                "done": a.completed_at is not None,
                "label": labels.get((a.item_id, a.reviewer_id), ""),
            }
        )
    queue = m.ReviewQueue.objects.get(pk=queue_id)
    for item in items:
        item.rows = assignments[item.pk]
        for row in item.rows:
            row["title"] = queue.label_title(row["label"]) if row["label"] else ""
        item.majority = majority(r["label"] for r in item.rows if r["label"])
        item.decision_title = queue.label_title(item.decision) if item.decision else ""
    return items


def review_item_get(*, item_id: int) -> m.ReviewItem:
    """One item with its queue, trajectory, run and task loaded.

    Raises:
        ReviewItem.DoesNotExist: no such item.
    """
    return m.ReviewItem.objects.select_related(
        "queue__run", "trajectory__run", "trajectory__task_version__task", "confirmed_by"
    ).get(pk=item_id)


def review_next_item(*, queue_id: int, reviewer, position: int) -> m.ReviewItem | None:
    """The next item of the queue assigned to ``reviewer`` and not yet labelled by them: after
    ``position`` first, then from the start."""
    open_items = m.ReviewItem.objects.filter(
        queue_id=queue_id, assignments__reviewer=reviewer, assignments__completed_at__isnull=True
    ).order_by("position")
    return (
        open_items.filter(position__gt=position).first()
        or open_items.exclude(position=position).first()
    )


def reviewers_eligible() -> list:
    """Active users who may review (reviewers, curators, superusers), by username."""
    User = get_user_model()
    users = (
        User.objects.filter(is_active=True)
        .filter(
            Q(is_superuser=True)
            | Q(groups__name=CURATORS)
            | Q(groups__permissions__codename="add_reviewlabel")
            | Q(user_permissions__codename="add_reviewlabel")
        )
        .distinct()
        .order_by("username")
    )
    return [u for u in users if may_review(u)]


def _labels_of_run(run_id: int) -> QuerySet[m.ReviewLabel]:
    return m.ReviewLabel.objects.filter(trajectory__run_id=run_id)


def run_review_summary(*, run_id: int) -> dict:
    """What review says about a run: labels by kind, reviewer agreement, the verifier's precision
    and recall against the reviewers' majority, and the feedback (hack examples, quarantines)."""
    labels = list(
        _labels_of_run(run_id)
        .select_related("reviewer", "trajectory__task_version__task")
        .order_by("id")
    )
    by_kind = Counter(lab.label for lab in labels)
    units: dict[int, dict] = defaultdict(dict)
    per_trajectory: dict[int, list[str]] = defaultdict(list)
    trajectories = {}
    for lab in labels:
        units[lab.item_id or -lab.trajectory_id][lab.reviewer.get_username()] = lab.label
        per_trajectory[lab.trajectory_id].append(lab.label)
        trajectories[lab.trajectory_id] = lab.trajectory
    rows = []
    for tid, labs in per_trajectory.items():
        t = trajectories[tid]
        rows.append(
            (
                verifier_pass(
                    reward=t.reward,
                    tests_passed=t.tests_passed,
                    tests_total=t.tests_total,
                    flags=t.flags,
                ),
                majority(labs),
            )
        )
    quarantines = list(
        m.ReviewItem.objects.filter(trajectory__run_id=run_id, decision=m.BROKEN_TASK)
        .select_related("trajectory__task_version__task", "confirmed_by", "queue")
        .order_by("id")
    )
    quarantines = [item for item in quarantines if item.feedback.get("quarantined")]
    return {
        "labels": len(labels),
        "trajectories": len(per_trajectory),
        "by_kind": [(name, title, by_kind.get(name, 0)) for name, title in m.LABELS],
        "agreement": agreement(units),
        "verifier": verifier_precision_recall(rows),
        "queues": review_queues().filter(
            Q(run_id=run_id)
            | Q(pk__in=m.ReviewItem.objects.filter(trajectory__run_id=run_id).values("queue_id"))
        ),
        "hack_examples": m.HackExample.objects.filter(trajectory__run_id=run_id).select_related(
            "task_version__task", "created_by"
        ),
        "quarantines": quarantines,
    }


def task_version_labels(*, task_version_id: int) -> QuerySet[m.ReviewLabel]:
    """Every label of a task version's trajectories, newest first, with reviewer, trajectory and
    queue."""
    return (
        m.ReviewLabel.objects.filter(trajectory__task_version_id=task_version_id)
        .select_related("reviewer", "trajectory", "item__queue")
        .order_by("-updated_at", "-id")
    )


def trajectory_review(*, trajectory_id: int, user) -> dict:
    """The review state of one trajectory for the replay page's panel: its labels, the current
    user's open items on it, its hack example."""
    labels = list(
        m.ReviewLabel.objects.filter(trajectory_id=trajectory_id)
        .select_related("reviewer", "item")
        .order_by("id")
    )
    mine = []
    if user is not None and user.is_authenticated:
        mine = list(
            m.ReviewItem.objects.filter(trajectory_id=trajectory_id, assignments__reviewer=user)
            .select_related("queue")
            .order_by("id")
        )
        done = set(
            m.ReviewAssignment.objects.filter(
                item__in=mine, reviewer=user, completed_at__isnull=False
            ).values_list("item_id", flat=True)
        )
        for item in mine:
            item.done = item.pk in done
    return {
        "labels": labels,
        "counts": Counter(lab.label for lab in labels).most_common(),
        "my_items": mine,
        "hack_example": m.HackExample.objects.filter(trajectory_id=trajectory_id).first(),
        "items": m.ReviewItem.objects.filter(trajectory_id=trajectory_id).count(),
    }


def replay_with_labels(replay: dict, labels: list) -> dict:
    """``replay`` (:func:`training.replay.replay_turns`) with each turn's ``labels``: ``"who:
    title"`` of the ``labels`` (review labels, their item and queue loaded) that point at it, so
    the replay marks those turns in its index and their headers."""
    at: dict[int, list[str]] = {}
    for lab in labels:
        if lab.turn is not None:
            at.setdefault(lab.turn, []).append(
                f"{lab.reviewer.get_username()}: {lab.item.queue.label_title(lab.label)}"
            )
    for turn in replay["turns"]:
        turn["labels"] = at.get(turn["index"], [])
    return replay


def trajectory_turn_labels(*, trajectory_id: int, user) -> list:
    """The review labels of a trajectory that point at a turn, for its replay page: none for a
    signed-out visitor (review data needs a sign-in, as the page's review panel says)."""
    if user is None or not user.is_authenticated:
        return []
    return list(
        m.ReviewLabel.objects.filter(trajectory_id=trajectory_id, turn__isnull=False)
        .select_related("reviewer", "item__queue")
        .order_by("id")
    )
