"""Writes of the human review: queues, assignments, labels and their feedback, task drafts.

Keyword-only ``<noun>_<verb>`` functions under ``transaction.atomic`` (DESIGN.md section 5).
Permission checks live here too, so that the pages, tests and any later API refuse alike:
:class:`~django.core.exceptions.PermissionDenied` for who may not,
:class:`~core.errors.InputError` (a ``ValueError`` whose message starts with the field's
name) for what may not be.
"""

from __future__ import annotations

import re

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from console.review import models as m
from console.review.sampling import sample
from core.errors import InputError
from core.permissions import is_curator, may_manage_queues, may_review, may_submit_drafts
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
MAX_REVIEWERS = 100  # reviewers of one item (a queue's reviewers_per_item and quorum)
DRAFT_SOURCE = "review-drafts"
DRAFT_TASK_SET = "review-drafts"
DRAFT_TASK_ID = re.compile(r"^review/[A-Za-z0-9][A-Za-z0-9_.\-/]{0,180}$")


def _name(user) -> str:
    return user.get_username() if user is not None else "?"


# --- queues and assignments ----------------------------------------------------------------------


LABEL_VALUE = re.compile(r"^[a-z][a-z0-9_]{0,19}$")


def label_set_check(labels) -> list[dict]:
    """A queue's label set as stored: ``[{"value", "title"}]``, 2 to
    :data:`~console.review.models.MAX_LABELS` labels with distinct values. Each label is an
    object or a value alone; a built-in value (``correct``, ``reward_hack``, ``broken_task``,
    ``ambiguous_task``, ``other``) keeps its meaning (the last two feed back, see
    :func:`review_label`) and its title unless one is given. None or empty: the built-in five.

    Raises:
        InputError: (``labels``) fewer than 2 or more than 9 labels, a value that is not 1-20
            lower-case letters, digits or ``_`` starting with a letter, a repeated value, or a
            title that is empty or over 40 characters.
    """
    if not labels:
        return [dict(lab) for lab in m.DEFAULT_LABEL_SET]
    if not isinstance(labels, list):
        raise InputError(
            "labels: a list of labels, e.g. correct, reward_hack, off_topic", field="labels"
        )
    builtin = dict(m.LABELS)
    out = []
    for raw in labels:
        entry = {"value": raw} if isinstance(raw, str) else raw
        if not isinstance(entry, dict):
            raise InputError("labels: each label is a value or {value, title}", field="labels")
        value = str(entry.get("value", "")).strip()
        if not LABEL_VALUE.match(value):
            raise InputError(
                f"labels: {value!r} is not a label value (1-20 lower-case letters, digits or _, "
                "starting with a letter)",
                field="labels",
            )
        title = str(entry.get("title") or builtin.get(value) or value.replace("_", " ")).strip()
        if not 1 <= len(title) <= 40:
            raise InputError(
                f"labels: the title of {value!r} must be 1-40 characters", field="labels"
            )
        if any(lab["value"] == value for lab in out):
            raise InputError(f"labels: {value!r} is there twice", field="labels")
        out.append({"value": value, "title": title})
    if not 2 <= len(out) <= m.MAX_LABELS:
        raise InputError(
            f"labels: give 2 to {m.MAX_LABELS} labels (keys 1-{m.MAX_LABELS} choose them)",
            field="labels",
        )
    return out


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
    labels: list | None = None,
    consensus: str = m.QUORUM,
    quorum: int | None = None,
) -> m.ReviewQueue:
    """Sample a review queue and assign each item to ``reviewers_per_item`` of ``reviewers``.

    Items are sampled from the trajectories of run ``run_id`` (every run when None) that match
    ``filters`` by ``strategy`` (:mod:`console.review.sampling`, seeded by ``seed``). Assignment
    is a balanced round robin: item i goes to reviewers ``(i k + j) mod n`` for j < k (k per
    item, n reviewers), so each reviewer gets floor or ceil of ``size k / n`` items.

    ``labels`` is the queue's label set (:func:`label_set_check`; default the built-in five);
    ``consensus`` and ``quorum`` say when a label feeds back (:data:`console.review.models.
    CONSENSUS_RULES`): ``quorum`` reviewers of an item agreeing, or a curator confirming
    (:func:`review_item_confirm`), so that one reviewer's label does not quarantine a task alone
    unless the queue says ``quorum=1``. Without a ``quorum``: 2 reviewers must agree, or, where
    each item has one reviewer, a curator must confirm (``consensus`` becomes ``curator``).

    Raises:
        PermissionDenied: ``created_by`` may not create queues (curators, operators, admins may).
        InputError: an empty name, unknown run or strategy, a size or reviewers per item out of
            range, a reviewer who may not review, an unknown filter, a bad label set, an unknown
            consensus rule, a quorum above the reviewers per item, or no trajectory to sample.
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
    label_set = label_set_check(labels)
    if consensus not in dict(m.CONSENSUS_RULES):
        raise InputError(
            f"consensus: unknown rule {consensus!r}; known: "
            f"{', '.join(rule for rule, _ in m.CONSENSUS_RULES)}",
            field="consensus",
        )
    if consensus == m.QUORUM and quorum is None:
        if isinstance(reviewers_per_item, int) and reviewers_per_item >= 2:
            quorum = 2
        else:  # one reviewer per item: a label never feeds back on one person's word
            consensus = m.CURATOR
    if consensus == m.QUORUM and (
        isinstance(quorum, bool)
        or not isinstance(quorum, int)
        or not 1 <= quorum <= reviewers_per_item
    ):
        raise InputError(
            f"quorum: must be a whole number in 1..{reviewers_per_item} (the reviewers per item): "
            "how many of an item's reviewers must agree before their label feeds back",
            field="quorum",
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
        labels=label_set,
        consensus=consensus,
        quorum=quorum if consensus == m.QUORUM else 0,
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


# --- labels, the queue's consensus rule, and what a decision feeds back ----------------------


@transaction.atomic
def review_label(
    *, item_id: int, reviewer, label: str, note: str = "", turn: int | None = None
) -> m.ReviewLabel:
    """Record ``reviewer``'s label of item ``item_id`` (a second call updates it), then apply the
    queue's consensus rule to the item (:func:`_item_decide`).

    ``turn`` points the label at one turn of the trajectory (its ``Turn.index``, 0-based; the
    replay shows it as turn ``turn + 1``): where the hack happened, where the task broke. None
    labels the whole trajectory.

    A label feeds back only once the rule decides it (:attr:`ReviewQueue.consensus_text`):
    ``quorum`` of the item's reviewers giving the same label, or a curator confirming one
    (:func:`review_item_confirm`); a queue with ``consensus="curator"`` waits for the curator
    whatever the reviewers agree. What a decision feeds back, in this transaction:

    * ``broken_task``: the trajectory's task version is quarantined (tasks_library's
      ``task_versions_quarantine``) with a reason naming who decided, the trajectory and the
      notes, for a curator to confirm or approve on the task page; a version already quarantined
      is left as it is. A later change of the decision leaves the quarantine to the curator.
    * ``reward_hack``: a :class:`~console.review.models.HackExample` of the trajectory's final code
      (one per trajectory), and the ``reviewed_hack`` flag with the agreeing reviewers' notes as
      evidence. A decision that moves away from ``reward_hack`` (a reviewer changed their label
      and the quorum is gone) takes this item's evidence back, and the flag and example with it
      once no item holds it.

    The label's ``feedback`` records the item's state after it: ``{"decision", "agree",
    "needed"}`` and what the decision fed back.

    Raises:
        PermissionDenied: ``reviewer`` is not assigned this item.
        InputError: no such item, a label not in the queue's label set, no note for a label
            that says something is wrong (reward hack, broken task, ambiguous task, other), or
            a ``turn`` the trajectory does not have.
    """
    item = _item_locked(item_id)
    assignment = m.ReviewAssignment.objects.filter(
        item=item, reviewer_id=getattr(reviewer, "pk", None)
    ).first()
    if assignment is None or not may_review(reviewer):
        raise PermissionDenied(
            f"item {item_id} is not assigned to {_name(reviewer)}; only its reviewers label it"
        )
    note = _label_checked(item.queue, label, note)
    _turn_checked(item.trajectory, turn)
    record = m.ReviewLabel.objects.filter(item=item, reviewer=reviewer).first() or m.ReviewLabel(
        item=item, trajectory=item.trajectory, reviewer=reviewer
    )
    record.label, record.note, record.turn = label, note, turn
    record.save()
    _item_decide(item)
    agree = m.ReviewLabel.objects.filter(item=item, label=label).count()
    record.feedback = {
        "decision": item.decision,
        "agree": agree,
        "needed": item.queue.quorum if item.queue.consensus == m.QUORUM else None,
        **(item.feedback if item.decision == label else {}),
    }
    record.save(update_fields=["feedback"])
    if assignment.completed_at is None:
        assignment.completed_at = timezone.now()
        assignment.save(update_fields=["completed_at"])
    return record


@transaction.atomic
def review_item_confirm(*, item_id: int, curator, label: str, note: str = "") -> m.ReviewItem:
    """A curator decides an item: ``label`` (one of the queue's) becomes its decision whatever
    the reviewers' count, and feeds back as :func:`review_label` says. Confirming again with
    another label changes the decision (a reward hack's evidence of this item is taken back).

    Raises:
        PermissionDenied: ``curator`` is not a curator.
        InputError: no such item, a label not in the queue's set, or no note for a label that
            says something is wrong.
    """
    if not is_curator(curator):
        raise PermissionDenied("only curators confirm review labels")
    item = _item_locked(item_id)
    note = _label_checked(item.queue, label, note)
    item.confirmed_by, item.confirmed_at, item.confirm_note = curator, timezone.now(), note
    item.save(update_fields=["confirmed_by", "confirmed_at", "confirm_note"])
    _item_decide(item, confirmed=label)
    return item


def _item_locked(item_id: int) -> m.ReviewItem:
    """Item ``item_id`` locked for this transaction, with its trajectory and queue.

    Raises:
        InputError: (``item``) no such item.
    """
    item = (
        m.ReviewItem.objects.select_for_update()
        .select_related("trajectory", "queue")
        .filter(pk=item_id)
        .first()
    )
    if item is None:
        raise InputError(f"item: review item {item_id} does not exist", field="item")
    return item


def _label_checked(queue: m.ReviewQueue, label: str, note: str) -> str:
    values = [lab["value"] for lab in queue.label_set]
    if label not in values:
        raise InputError(
            f"label: unknown {label!r}; this queue's labels: {', '.join(values)}", field="label"
        )
    note = (note or "").strip()
    if label in m.NOTE_REQUIRED and not note:
        raise InputError(
            f"note: say why the trajectory is {queue.label_title(label)}: what you saw, where",
            field="note",
        )
    return note


def _turn_checked(trajectory: Trajectory, turn: int | None) -> None:
    if turn is None:
        return
    count = trajectory.turns.count()
    if isinstance(turn, bool) or not isinstance(turn, int) or not 0 <= turn < count:
        raise InputError(
            f"turn: the trajectory has {count} turn(s), numbered 1 to {count} in the replay "
            f"(indices 0 to {count - 1}); index {turn!r} is none of them",
            field="turn",
        )


def item_decision(item: m.ReviewItem, counts: dict[str, int]) -> tuple[str, str]:
    """``(label, how)`` the queue's rule decides for ``item`` given its reviewers' label counts:
    a curator's confirmation first, else (rule ``quorum``) the one label at least ``quorum``
    reviewers gave; ``("", "")`` while undecided (too few agree, or two labels both reached it)."""
    if item.confirmed_by_id is not None and item.decision and item.decided_how == m.CURATOR:
        return item.decision, m.CURATOR
    queue = item.queue
    if queue.consensus != m.QUORUM:
        return "", ""
    reached = [label for label, n in counts.items() if n >= queue.quorum]
    return (reached[0], m.QUORUM) if len(reached) == 1 else ("", "")


def _item_decide(item: m.ReviewItem, *, confirmed: str | None = None) -> None:
    """Apply the queue's consensus rule to ``item`` (locked) and feed a changed decision back."""
    labels = list(m.ReviewLabel.objects.filter(item=item).select_related("reviewer").order_by("id"))
    if confirmed is not None:
        decision, how = confirmed, m.CURATOR
    else:
        counts: dict[str, int] = {}
        for lab in labels:
            counts[lab.label] = counts.get(lab.label, 0) + 1
        decision, how = item_decision(item, counts)
    previous = item.decision
    if (decision, how) == (previous, item.decided_how):
        return
    feedback = dict(item.feedback) if decision == previous else {}
    if previous == m.REWARD_HACK and decision != m.REWARD_HACK:
        _hack_retract(item=item)
        feedback = {}
    if decision != previous:
        agreeing = [lab for lab in labels if lab.label == decision]
        if decision == m.BROKEN_TASK:
            feedback = _broken_task_feedback(item=item, agreeing=agreeing, how=how)
        elif decision == m.REWARD_HACK:
            feedback = _reward_hack_feedback(item=item, agreeing=agreeing, how=how)
    item.decision, item.decided_how, item.feedback = decision, how if decision else "", feedback
    item.save(update_fields=["decision", "decided_how", "feedback"])


def _decided_by(item: m.ReviewItem, agreeing: list[m.ReviewLabel], how: str) -> str:
    if how == m.CURATOR:
        return f"curator {_name(item.confirmed_by)} confirmed"
    return (
        f"{len(agreeing)} reviewers agreed ({', '.join(_name(lab.reviewer) for lab in agreeing)})"
    )


def _broken_task_feedback(*, item: m.ReviewItem, agreeing: list, how: str) -> dict:
    trajectory = item.trajectory
    version = TaskVersion.objects.select_for_update().get(pk=trajectory.task_version_id)
    if version.quarantined:
        return {"quarantined": False, "already_quarantined": True, "task_version": version.pk}
    notes = [f"{_name(lab.reviewer)}: {lab.note}" for lab in agreeing if lab.note]
    if how == m.CURATOR:
        notes.append(f"{_name(item.confirmed_by)} (curator): {item.confirm_note}")
    author = _name(item.confirmed_by) if how == m.CURATOR else _name(agreeing[0].reviewer)
    reason = (
        f"review: {_decided_by(item, agreeing, how)} that trajectory {trajectory.pk} (run "
        f"{trajectory.run_id}, step {trajectory.step}; review queue {item.queue_id}, item "
        f"{item.pk}) shows a broken_task: {'; '.join(notes)} -- a curator confirms (keeps the "
        "quarantine) or approves with a reason"
    )
    task_versions_quarantine(version_ids=[version.pk], author=author, reason=reason)
    return {"quarantined": True, "task_version": version.pk}


def _reward_hack_feedback(*, item: m.ReviewItem, agreeing: list, how: str) -> dict:
    trajectory = Trajectory.objects.select_for_update().get(pk=item.trajectory_id)
    detector_flags = [f for f in trajectory.flags if f != REVIEWED_HACK]
    notes = [
        {"reviewer": _name(lab.reviewer), "note": lab.note, "queue": item.queue_id, "item": item.pk}
        for lab in agreeing
    ]
    if how == m.CURATOR:
        notes.append(
            {
                "reviewer": _name(item.confirmed_by),
                "note": item.confirm_note,
                "queue": item.queue_id,
                "item": item.pk,
                "confirmed": True,
            }
        )
    first = notes[0]
    example, _ = m.HackExample.objects.get_or_create(
        trajectory=trajectory,
        defaults={
            "task_version_id": trajectory.task_version_id,
            "code": trajectory.final_code,
            "label": m.REWARD_HACK,
            "flags": detector_flags,
            "note": first["note"],  # every agreeing note is in the flag's evidence
            "created_by": agreeing[0].reviewer if agreeing else item.confirmed_by,
        },
    )
    evidence = dict(trajectory.flag_evidence.get(REVIEWED_HACK) or {})
    reviews = [r for r in evidence.get("reviews", []) if r.get("item") != item.pk] + notes
    trajectory.flag_evidence = {
        **trajectory.flag_evidence,
        REVIEWED_HACK: {"reviewer": first["reviewer"], "note": first["note"], "reviews": reviews},
    }
    if REVIEWED_HACK not in trajectory.flags:
        trajectory.flags = [*trajectory.flags, REVIEWED_HACK]
    trajectory.save(update_fields=["flags", "flag_evidence"])
    return {"hack_example": example.pk, "flagged": REVIEWED_HACK}


def _hack_retract(*, item: m.ReviewItem) -> None:
    """Take ``item``'s reward-hack evidence off its trajectory; the flag and the hack example go
    once no item's evidence is left."""
    trajectory = Trajectory.objects.select_for_update().get(pk=item.trajectory_id)
    evidence = dict(trajectory.flag_evidence.get(REVIEWED_HACK) or {})
    reviews = [r for r in evidence.get("reviews", []) if r.get("item") != item.pk]
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
        "setup_code": suite.setup_code,
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
