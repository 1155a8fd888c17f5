"""Writes of the human review: queues, assignments, labels and their feedback, task drafts.

Keyword-only ``<noun>_<verb>`` functions under ``transaction.atomic`` (DESIGN.md section 5).
Permission checks live here too, so that the pages, tests and any later API refuse alike:
:class:`~django.core.exceptions.PermissionDenied` for who may not,
:class:`~console.core.errors.InputError` (a ``ValueError`` whose message starts with the field's
name) for what may not be.
"""

from __future__ import annotations

import re

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from console.core.errors import InputError
from console.core.permissions import is_curator, may_manage_queues, may_review, may_submit_drafts
from console.review import models as m
from console.review.sampling import sample
from tasks_library.importers import ImportFormatError
from tasks_library.models import Task, TaskSet, TaskVersion
from tasks_library.selectors import task_set_versions
from tasks_library.services import task_versions_quarantine, tasks_import
from training import selectors as training_selectors
from training.flags import REVIEWED_HACK
from training.models import TrainingRun, Trajectory

# Keys a queue's ``filters`` may hold: keyword arguments of training.selectors.trajectory_list.
FILTER_KEYS = ("step_min", "step_max", "task", "reward_min", "reward_max", "flag", "status")
MAX_QUEUE_SIZE = 5000
DRAFT_SOURCE = "review-drafts"
DRAFT_TASK_SET = "review-drafts"
DRAFT_TASK_ID = re.compile(r"^review/[A-Za-z0-9][A-Za-z0-9_.\-/]{0,180}$")


def _name(user) -> str:
    return user.get_username() if user is not None else "?"


# --- queues and assignments ----------------------------------------------------------------------


@transaction.atomic
def review_queue_create(
    *,
    name: str,
    run_id: int | None,
    strategy: str,
    size: int,
    reviewers_per_item: int,
    reviewers: list,
    created_by,
    seed: int = 0,
    filters: dict | None = None,
) -> m.ReviewQueue:
    """Sample a review queue and assign each item to ``reviewers_per_item`` of ``reviewers``.

    Items are sampled from the trajectories of run ``run_id`` (every run when None) that match
    ``filters`` by ``strategy`` (:mod:`console.review.sampling`, seeded by ``seed``). Assignment
    is a balanced round robin: item i goes to reviewers ``(i k + j) mod n`` for j < k (k per
    item, n reviewers), so each reviewer gets floor or ceil of ``size k / n`` items.

    Raises:
        PermissionDenied: ``created_by`` may not create queues (curators, operators, admins may).
        InputError: an empty name, unknown run or strategy, a size or reviewers per item out of
            range, a reviewer who may not review, an unknown filter, or no trajectory to sample.
    """
    if not may_manage_queues(created_by):
        raise PermissionDenied("only curators and operators may create review queues")
    name = (name or "").strip()
    if not name:
        raise InputError("name: give the queue a name", field="name")
    if strategy not in dict(m.STRATEGIES):
        raise InputError(
            f"strategy: unknown {strategy!r}; known: {', '.join(s for s, _ in m.STRATEGIES)}",
            field="strategy",
        )
    if not isinstance(size, int) or not 1 <= size <= MAX_QUEUE_SIZE:
        raise InputError(f"size: must be a whole number in 1..{MAX_QUEUE_SIZE}", field="size")
    reviewers = list(dict.fromkeys(reviewers))
    if not reviewers:
        raise InputError("reviewers: choose at least one reviewer", field="reviewers")
    refused = [_name(r) for r in reviewers if not may_review(r)]
    if refused:
        raise InputError(
            f"reviewers: {', '.join(refused)} may not review (add them to the reviewers group)",
            field="reviewers",
        )
    if not isinstance(reviewers_per_item, int) or not 1 <= reviewers_per_item <= len(reviewers):
        raise InputError(
            f"reviewers_per_item: must be in 1..{len(reviewers)} (the number of reviewers chosen)",
            field="reviewers_per_item",
        )
    run = None
    if run_id is not None:
        run = TrainingRun.objects.filter(pk=run_id).first()
        if run is None:
            raise InputError(f"run: run {run_id} does not exist", field="run")
    filters = {k: v for k, v in (filters or {}).items() if v not in (None, "")}
    unknown = sorted(set(filters) - set(FILTER_KEYS))
    if unknown:
        raise InputError(
            f"filters: unknown filter {unknown[0]!r}; known: {', '.join(FILTER_KEYS)}",
            field="filters",
        )
    trajectories = training_selectors.trajectory_list(run_id=run_id, **filters)
    picks = sample(strategy, trajectories, size=size, seed=seed)
    if not picks:
        where = f"run {run_id}" if run_id is not None else "any run"
        raise InputError(
            f"run: {where} has no trajectory matching the filters; nothing to review", field="run"
        )
    queue = m.ReviewQueue.objects.create(
        name=name,
        run=run,
        strategy=strategy,
        size=size,
        seed=seed,
        reviewers_per_item=reviewers_per_item,
        filters=filters,
        created_by=created_by,
    )
    items = m.ReviewItem.objects.bulk_create(
        m.ReviewItem(
            queue=queue, trajectory_id=pick.trajectory_id, position=i, reason=pick.reason[:300]
        )
        for i, pick in enumerate(picks)
    )
    n, k = len(reviewers), reviewers_per_item
    m.ReviewAssignment.objects.bulk_create(
        m.ReviewAssignment(item=item, reviewer=reviewers[(i * k + j) % n], assigned_by=created_by)
        for i, item in enumerate(items)
        for j in range(k)
    )
    return queue


@transaction.atomic
def review_assign(*, item_id: int, reviewer, assigned_by=None) -> m.ReviewAssignment:
    """Give item ``item_id`` to ``reviewer`` too (idempotent: an existing assignment is returned).

    Raises:
        PermissionDenied: ``assigned_by`` (when given) may not manage queues.
        InputError: no such item, or ``reviewer`` may not review.
    """
    if assigned_by is not None and not may_manage_queues(assigned_by):
        raise PermissionDenied("only curators and operators may assign review items")
    item = m.ReviewItem.objects.filter(pk=item_id).first()
    if item is None:
        raise InputError(f"item: review item {item_id} does not exist", field="item")
    if reviewer is None or not may_review(reviewer):
        raise InputError(
            f"reviewer: {_name(reviewer)} may not review (add them to the reviewers group)",
            field="reviewer",
        )
    assignment, _ = m.ReviewAssignment.objects.get_or_create(
        item=item, reviewer=reviewer, defaults={"assigned_by": assigned_by}
    )
    return assignment


# --- labels and their feedback -----------------------------------------------------------------


@transaction.atomic
def review_label(*, item_id: int, reviewer, label: str, note: str = "") -> m.ReviewLabel:
    """Record ``reviewer``'s label of item ``item_id`` (a second call updates it) and feed it back.

    Feedback, in this transaction:

    * ``broken_task``: the trajectory's task version is quarantined (tasks_library's
      ``task_versions_quarantine``) with a reason naming the reviewer, the trajectory and the
      note, for a curator to confirm or approve on the task page; a version already
      quarantined is left as it is.
    * ``reward_hack``: a :class:`~console.review.models.HackExample` of the trajectory's final code
      (one per trajectory), and the ``reviewed_hack`` flag on the trajectory with the
      reviewer and note as evidence. Relabelling away from ``reward_hack`` takes the reviewer's
      evidence back, and the flag and example with it once no reviewer holds the label.

    Raises:
        PermissionDenied: ``reviewer`` is not assigned this item.
        InputError: no such item, an unknown label, or no note for a label other than ``correct``.
    """
    item = m.ReviewItem.objects.select_related("trajectory").filter(pk=item_id).first()
    if item is None:
        raise InputError(f"item: review item {item_id} does not exist", field="item")
    assignment = m.ReviewAssignment.objects.filter(
        item=item, reviewer_id=getattr(reviewer, "pk", None)
    ).first()
    if assignment is None or not may_review(reviewer):
        raise PermissionDenied(
            f"item {item_id} is not assigned to {_name(reviewer)}; only its reviewers label it"
        )
    if label not in m.LABEL_NAMES:
        raise InputError(
            f"label: unknown {label!r}; known: {', '.join(m.LABEL_NAMES)}", field="label"
        )
    note = (note or "").strip()
    if label != m.CORRECT and not note:
        raise InputError(
            f"note: say why the trajectory is {label.replace('_', ' ')}: what you saw, where",
            field="note",
        )
    existing = (
        m.ReviewLabel.objects.select_for_update().filter(item=item, reviewer=reviewer).first()
    )
    previous = existing.label if existing else None
    if existing is None:
        record = m.ReviewLabel(item=item, trajectory=item.trajectory, reviewer=reviewer)
    else:
        record = existing
    record.label, record.note = label, note
    feedback = {}
    if previous == m.REWARD_HACK and label != m.REWARD_HACK:
        _hack_retract(trajectory_id=item.trajectory_id, reviewer=reviewer)
    if label == m.BROKEN_TASK:
        feedback = _broken_task_feedback(item=item, reviewer=reviewer, note=note)
    elif label == m.REWARD_HACK:
        feedback = _reward_hack_feedback(item=item, reviewer=reviewer, note=note)
    record.feedback = feedback
    record.save()
    if assignment.completed_at is None:
        assignment.completed_at = timezone.now()
        assignment.save(update_fields=["completed_at"])
    return record


def _broken_task_feedback(*, item: m.ReviewItem, reviewer, note: str) -> dict:
    trajectory = item.trajectory
    version = TaskVersion.objects.select_for_update().get(pk=trajectory.task_version_id)
    if version.quarantined:
        return {"quarantined": False, "already_quarantined": True, "task_version": version.pk}
    reason = (
        f"review: {_name(reviewer)} labelled trajectory {trajectory.pk} (run {trajectory.run_id}, "
        f"step {trajectory.step}; review queue {item.queue_id}, item {item.pk}) broken_task: "
        f"{note} -- a curator confirms (keeps the quarantine) or approves with a reason"
    )
    task_versions_quarantine(version_ids=[version.pk], author=_name(reviewer), reason=reason)
    return {"quarantined": True, "task_version": version.pk}


def _reward_hack_feedback(*, item: m.ReviewItem, reviewer, note: str) -> dict:
    trajectory = Trajectory.objects.select_for_update().get(pk=item.trajectory_id)
    detector_flags = [f for f in trajectory.flags if f != REVIEWED_HACK]
    example, _ = m.HackExample.objects.get_or_create(
        trajectory=trajectory,
        defaults={
            "task_version_id": trajectory.task_version_id,
            "code": trajectory.final_code,
            "label": m.REWARD_HACK,
            "flags": detector_flags,
            "note": note,
            "created_by": reviewer,
        },
    )
    evidence = dict(trajectory.flag_evidence.get(REVIEWED_HACK) or {})
    reviews = [r for r in evidence.get("reviews", []) if r.get("reviewer") != _name(reviewer)]
    reviews.append(
        {"reviewer": _name(reviewer), "note": note, "queue": item.queue_id, "item": item.pk}
    )
    trajectory.flag_evidence = {
        **trajectory.flag_evidence,
        REVIEWED_HACK: {
            "reviewer": reviews[0]["reviewer"],
            "note": reviews[0]["note"],
            "reviews": reviews,
        },
    }
    if REVIEWED_HACK not in trajectory.flags:
        trajectory.flags = [*trajectory.flags, REVIEWED_HACK]
    trajectory.save(update_fields=["flags", "flag_evidence"])
    return {"hack_example": example.pk, "flagged": REVIEWED_HACK}


def _hack_retract(*, trajectory_id: int, reviewer) -> None:
    """Take ``reviewer``'s reward-hack evidence off a trajectory; the flag and the hack example
    go once no reviewer's evidence is left."""
    trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
    evidence = dict(trajectory.flag_evidence.get(REVIEWED_HACK) or {})
    reviews = [r for r in evidence.get("reviews", []) if r.get("reviewer") != _name(reviewer)]
    others = dict(trajectory.flag_evidence)
    if reviews:
        others[REVIEWED_HACK] = {
            "reviewer": reviews[0]["reviewer"],
            "note": reviews[0]["note"],
            "reviews": reviews,
        }
    else:
        others.pop(REVIEWED_HACK, None)
        trajectory.flags = [f for f in trajectory.flags if f != REVIEWED_HACK]
        m.HackExample.objects.filter(trajectory=trajectory).delete()
    trajectory.flag_evidence = others
    trajectory.save(update_fields=["flags", "flag_evidence"])


# --- task drafts ---------------------------------------------------------------------------------


@transaction.atomic
def task_draft_create(
    *,
    trajectory_id: int,
    created_by,
    task_id: str,
    prompt: str,
    entry_point: str,
    reference_solution: str,
    tests: str,
    files: dict | None = None,
    harness: str = "python-check",
) -> m.TaskDraft:
    """A reviewer's draft of a new task made from trajectory ``trajectory_id``.

    Raises:
        PermissionDenied: ``created_by`` may not review, or (not being a curator) reviews no item
            of this trajectory.
        InputError: no such trajectory, a task id not of the form ``review/<name>``, or an
            empty prompt, entry point or tests.
    """
    if not may_review(created_by):
        raise PermissionDenied("only reviewers and curators write task drafts")
    trajectory = Trajectory.objects.filter(pk=trajectory_id).first()
    if trajectory is None:
        raise InputError(
            f"trajectory: trajectory {trajectory_id} does not exist", field="trajectory"
        )
    if (
        not is_curator(created_by)
        and not m.ReviewAssignment.objects.filter(
            reviewer=created_by, item__trajectory=trajectory
        ).exists()
    ):
        raise PermissionDenied(f"trajectory {trajectory_id} is in none of your review items")
    task_id = (task_id or "").strip()
    if not DRAFT_TASK_ID.match(task_id):
        raise InputError(
            (
                "task_id: name it review/<name> (letters, digits, - _ . /), e.g. "
                "review/close-elements-2"
            ),
            field="task_id",
        )
    for field, value in (("prompt", prompt), ("entry_point", entry_point), ("tests", tests)):
        if not (value or "").strip():
            raise InputError(f"{field}: required", field=field)
    if files is not None and not isinstance(files, dict):
        raise InputError("files: an object {relative path: text}", field="files")
    return m.TaskDraft.objects.create(
        from_trajectory=trajectory,
        task_id=task_id,
        prompt=prompt.replace("\r\n", "\n"),
        entry_point=entry_point.strip(),
        reference_solution=(reference_solution or "").replace("\r\n", "\n"),
        tests=tests.replace("\r\n", "\n"),
        files=files or {},
        harness=harness or "python-check",
        created_by=created_by,
    )


def _pinned_record(version: TaskVersion) -> dict:
    """An import record that reproduces ``version`` exactly (same content hash)."""
    suite, env = version.test_suite, version.environment
    return {
        "task_id": version.task.task_id,
        "prompt": version.prompt,
        "entry_point": version.entry_point,
        "reference_solution": version.reference_solution,
        "tests": suite.hidden_tests,
        "visible_tests": suite.visible_tests,
        "harness": suite.harness,
        "timeout_s": suite.timeout_s,
        "test_timeout_s": suite.test_timeout_s,
        "files": version.files,
        "environment": {
            "name": env.name,
            "runtime": env.runtime,
            "packages": env.packages,
            "image": env.image,
        },
        "where": f"task set {DRAFT_TASK_SET}: {version.task.task_id} v{version.number}",
    }


@transaction.atomic
def task_draft_submit(*, draft_id: int, submitted_by) -> TaskVersion:
    """Import a draft into the task library (``tasks_import``, source ``review-drafts``) and pin
    it into task set ``review-drafts`` beside the drafts submitted before (their current
    versions). All or nothing: an error leaves the library and the draft as they were.

    Raises:
        PermissionDenied: ``submitted_by`` is not a curator.
        InputError: no such draft, already submitted, a task id another source owns, or content
            the importer refuses (its message, naming the field).
    """
    if not may_submit_drafts(submitted_by):
        raise PermissionDenied("only curators submit task drafts to the task library")
    draft = m.TaskDraft.objects.select_for_update().filter(pk=draft_id).first()
    if draft is None:
        raise InputError(f"draft: task draft {draft_id} does not exist", field="draft")
    if draft.status != m.TaskDraft.DRAFT:
        raise InputError(f"draft: task draft {draft_id} was already submitted", field="draft")
    owner = Task.objects.filter(task_id=draft.task_id).exclude(source=DRAFT_SOURCE).first()
    if owner is not None:
        raise InputError(
            f"task_id: {draft.task_id} is a task of source {owner.source}; choose another id",
            field="task_id",
        )
    task_set = TaskSet.objects.filter(name=DRAFT_TASK_SET).first()
    earlier = (
        []
        if task_set is None
        else [
            v
            for v in task_set_versions(task_set=task_set).select_related(
                "task", "test_suite", "environment"
            )
            if v.task.task_id != draft.task_id
        ]
    )
    record = {
        "task_id": draft.task_id,
        "prompt": draft.prompt,
        "entry_point": draft.entry_point,
        "reference_solution": draft.reference_solution,
        "tests": draft.tests,
        "harness": draft.harness,
        "files": draft.files,
        "source": DRAFT_SOURCE,
        "where": f"task draft {draft.pk}",
    }
    change_note = (
        f"task draft {draft.pk} by {_name(draft.created_by)} from trajectory "
        f"{draft.from_trajectory_id}"
    )
    try:
        with transaction.atomic():
            report = tasks_import(
                source=DRAFT_SOURCE,
                task_set_name=DRAFT_TASK_SET,
                records=[*(_pinned_record(v) for v in earlier), record],
                change_note=change_note,
                author=_name(submitted_by),
            )
            if report.new_versions > 1:
                raise InputError(
                    "draft: re-pinning the earlier drafts changed their content; nothing imported",
                    field="draft",
                )
    except ImportFormatError as exc:
        # the draft's own names: its hidden tests are ``tests``, a workspace file is ``files``
        field = {"test": "tests"}.get(exc.field, (exc.field or "").split(".")[0] or None)
        raise InputError(f"{field}: {exc.problem}" if field else exc.detail, field=field) from exc
    version = list(task_set_versions(task_set=TaskSet.objects.get(name=DRAFT_TASK_SET)))[-1]
    draft.status, draft.task_version = m.TaskDraft.SUBMITTED, version
    draft.submitted_by, draft.submitted_at = submitted_by, timezone.now()
    draft.save(update_fields=["status", "task_version", "submitted_by", "submitted_at"])
    return version
