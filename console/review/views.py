"""Review pages: my queues, a new queue, a queue's overview, the labelling page, task drafts, the
run-level summary and a task version's labels.

Every page needs a signed-in user (anonymous users go to the login page), and while the console
is private (``CRUCIBLE_CONSOLE_PUBLIC`` off) reading one needs a role too
(:mod:`core.access`); writes are checked by :mod:`console.review.services` (403 when the
role may not). Thin: forms check, selectors read, services write.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from console.review import models as m
from console.review import selectors as selectors
from console.review import services as services
from console.review.forms import (
    AssignForm,
    ConfirmForm,
    DraftForm,
    LabelForm,
    QueueForm,
    first_error,
)
from core.access import console_read_page
from core.errors import InputError, form_add_error
from core.permissions import is_curator, may_manage_queues, may_review, may_submit_drafts
from tasks_library.models import TaskVersion
from training import flags
from training import selectors as training_selectors
from training.models import TrainingRun
from training.replay import replay_turns


def _item_or_404(item_id: int) -> m.ReviewItem:
    try:
        return selectors.review_item_get(item_id=item_id)
    except m.ReviewItem.DoesNotExist:
        raise Http404(f"review item {item_id} does not exist") from None


@login_required
@console_read_page
def review_home(request: HttpRequest) -> HttpResponse:
    """My queues with my progress, then every queue with its progress."""
    mine = list(selectors.review_queues_of(user=request.user))
    return render(
        request,
        "review/home.html",
        {
            "mine": mine,
            "queues": selectors.review_queues()[:200],
            "can_manage": may_manage_queues(request.user),
            "my_assigned": sum(q.my_assigned for q in mine),
            "my_done": sum(q.my_done for q in mine),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def review_queue_new(request: HttpRequest) -> HttpResponse:
    """The form of a new queue (curators and operators); a valid post samples it and opens it."""
    if not may_manage_queues(request.user):
        raise PermissionDenied("only curators and operators may create review queues")
    initial = {}
    if request.GET.get("run", "").isdigit():
        initial["run"] = int(request.GET["run"])
    form = QueueForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            queue = services.review_queue_create(
                name=data["name"],
                run_id=data["run"].pk if data["run"] else None,
                strategy=data["strategy"],
                size=data["size"],
                reviewers_per_item=data["reviewers_per_item"],
                reviewers=list(data["reviewers"]),
                created_by=request.user,
                seed=data["seed"] or 0,
                filters=form.filters(),
                labels=form.label_set(),
                consensus=data["consensus"] or m.QUORUM,
                quorum=data["quorum"],
            )
        except InputError as exc:
            form_add_error(form, exc)
        else:
            messages.success(
                request, f"review queue {queue.name}: {queue.items.count()} items assigned"
            )
            return redirect("review-queue", queue_id=queue.pk)
    return render(request, "review/queue_new.html", {"form": form})


@login_required
@console_read_page
def review_queue(request: HttpRequest, queue_id: int) -> HttpResponse:
    """A queue's items with their reviewers and labels, per-reviewer progress, and an "assign to"
    control per item for curators and operators."""
    queue = get_object_or_404(selectors.review_queues(), pk=queue_id)
    can_manage = may_manage_queues(request.user)
    return render(
        request,
        "review/queue.html",
        {
            "queue": queue,
            "items": selectors.review_queue_items(queue_id=queue.pk),
            "progress": selectors.review_queue_progress(queue_id=queue.pk),
            "can_manage": can_manage,
            "eligible": selectors.reviewers_eligible() if can_manage else [],
        },
    )


@login_required
@require_POST
def review_item_assign(request: HttpRequest, item_id: int) -> HttpResponse:
    """Give one item to one more reviewer (curators and operators)."""
    if not may_manage_queues(request.user):
        raise PermissionDenied("only curators and operators may assign review items")
    item = _item_or_404(item_id)
    form = AssignForm(request.POST)
    if not form.is_valid():
        messages.error(request, first_error(form))
    else:
        try:
            services.review_assign(
                item_id=item.pk, reviewer=form.cleaned_data["reviewer"], assigned_by=request.user
            )
        except InputError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                (
                    f"item {item.position + 1} assigned to "
                    f"{form.cleaned_data['reviewer'].get_username()}"
                ),
            )
    return redirect(f"{reverse('review-queue', args=[item.queue_id])}#item-{item.pk}")


def _consensus(item: m.ReviewItem, *, show_counts: bool) -> dict:
    """The item's consensus state for its page: the queue's rule in words, the decision (if any)
    and, once the reader may see others' labels, how many gave each."""
    queue = item.queue
    counts: dict[str, int] = {}
    for value in item.labels.values_list("label", flat=True):
        counts[value] = counts.get(value, 0) + 1
    return {
        "rule": queue.consensus_text,
        "decision": item.decision,
        "decision_title": queue.label_title(item.decision) if item.decision else "",
        "decided_how": item.decided_how,
        "feedback": item.feedback,
        "confirmed_by": item.confirmed_by,
        "confirm_note": item.confirm_note,
        "needed": queue.quorum if queue.consensus == m.QUORUM else None,
        "labelled": sum(counts.values()),
        "counts": (
            [
                (queue.label_title(value), n)
                for value, n in sorted(counts.items(), key=lambda c: -c[1])
            ]
            if show_counts
            else []
        ),
    }


def _item_context(
    request: HttpRequest, item: m.ReviewItem, *, label_form=None, draft_form=None, confirm_form=None
) -> dict:
    trajectory = item.trajectory
    user = request.user
    queue = item.queue
    assignment = item.assignments.filter(reviewer=user).first()
    mine = m.ReviewLabel.objects.filter(item=item, reviewer=user).first()
    # Others' labels stay hidden from a reviewer until they have labelled (no anchoring).
    show_others = mine is not None or assignment is None
    others = (
        list(item.labels.exclude(reviewer=user).select_related("reviewer").order_by("id"))
        if show_others
        else []
    )
    for lab in others:
        lab.title = queue.label_title(lab.label)
    version = trajectory.task_version
    if label_form is None:
        label_form = LabelForm(
            label_set=queue.label_set,
            initial={
                "label": mine.label if mine else None,
                "note": mine.note if mine else "",
                "turn": mine.turn + 1 if mine and mine.turn is not None else None,
                "advance": True,
            },
        )
    can_confirm = is_curator(user)
    if confirm_form is None and can_confirm:
        confirm_form = ConfirmForm(
            label_set=queue.label_set,
            initial={"label": item.decision or None, "note": item.confirm_note},
        )
    if draft_form is None:
        draft_form = DraftForm(
            initial={
                "task_id": (
                    f"review/{version.task.task_id.replace('/', '-').lower()}-t{trajectory.pk}"
                ),
                "prompt": version.prompt,
                "entry_point": version.entry_point,
                "reference_solution": version.reference_solution,
                "tests": "def check(candidate):\n    assert candidate() == ...\n",
            }
        )
    shown = [mine, *others] if mine else others
    return {
        "item": item,
        "queue": queue,
        "trajectory": trajectory,
        "run": trajectory.run,
        **selectors.replay_with_labels(replay_turns(trajectory=trajectory), shown),
        "embedded": True,
        "episode": training_selectors.trajectory_episode(trajectory=trajectory),
        "consensus": _consensus(item, show_counts=show_others),
        "can_confirm": can_confirm,
        "confirm_form": confirm_form,
        "mine_title": queue.label_title(mine.label) if mine else "",
        "label_buttons": [
            {
                "key": i + 1,
                "value": lab["value"],
                "title": lab["title"],
                "needs_note": lab["value"] in m.NOTE_REQUIRED,
                "feeds_back": lab["value"] in m.FEEDBACK_LABELS,
            }
            for i, lab in enumerate(queue.label_set)
        ],
        "version": version,
        "task": version.task,
        "components": sorted(trajectory.reward_components.items()),
        "flags": [
            (flag, flags.evidence_text(trajectory.flag_evidence.get(flag)))
            for flag in trajectory.flags
        ],
        "monitor_scores": training_selectors.trajectory_monitor_rows(trajectory=trajectory),
        "assignment": assignment,
        "mine": mine,
        "others": others,
        "hidden_others": not show_others,
        "assignees": item.assignments.select_related("reviewer").order_by("id"),
        "next_item": selectors.review_next_item(
            queue_id=item.queue_id, reviewer=user, position=item.position
        )
        if assignment
        else None,
        "label_form": label_form,
        "draft_form": draft_form,
        "can_draft": may_review(user) and (assignment is not None or is_curator(user)),
        "drafts": m.TaskDraft.objects.filter(from_trajectory=trajectory).order_by("-id"),
        "hack_example": m.HackExample.objects.filter(trajectory=trajectory).first(),
        "my_progress": _my_progress(item.queue_id, user) if assignment else None,
    }


def _my_progress(queue_id: int, user) -> dict:
    mine = m.ReviewAssignment.objects.filter(item__queue_id=queue_id, reviewer=user)
    return {"done": mine.filter(completed_at__isnull=False).count(), "assigned": mine.count()}


@login_required
@console_read_page
def review_item(request: HttpRequest, item_id: int) -> HttpResponse:
    """The labelling page: the trajectory's summary, label buttons (keys 1-5), a note, "next item",
    and a task draft form."""
    item = _item_or_404(item_id)
    return render(request, "review/item.html", _item_context(request, item))


@login_required
@require_POST
def review_item_label(request: HttpRequest, item_id: int) -> HttpResponse:
    """Label an item (its assigned reviewers only); then the next open item, or this one again."""
    item = _item_or_404(item_id)
    if not (may_review(request.user) and item.assignments.filter(reviewer=request.user).exists()):
        raise PermissionDenied(
            f"item {item.pk} is not assigned to you; only its reviewers label it"
        )
    form = LabelForm(request.POST, label_set=item.queue.label_set)
    if not form.is_valid():
        messages.error(request, first_error(form))
        return render(
            request,
            "review/item.html",
            _item_context(request, item, label_form=form),
            status=400,
        )
    try:
        number = form.cleaned_data["turn"]  # as the replay numbers turns, from 1
        record = services.review_label(
            item_id=item.pk,
            reviewer=request.user,
            label=form.cleaned_data["label"],
            note=form.cleaned_data["note"],
            turn=None if number is None else number - 1,
        )
    except InputError as exc:
        form_add_error(form, exc)
        return render(
            request,
            "review/item.html",
            _item_context(request, item, label_form=form),
            status=400,
        )
    done = f"item {item.position + 1} labelled {item.queue.label_title(record.label)}"
    messages.success(request, done + _feedback_said(item.queue, record.feedback, record.label))
    following = (
        selectors.review_next_item(
            queue_id=item.queue_id, reviewer=request.user, position=item.position
        )
        if form.cleaned_data["advance"]
        else None
    )
    return redirect("review-item", item_id=following.pk if following else item.pk)


def _feedback_said(queue: m.ReviewQueue, feedback: dict, label: str) -> str:
    """What a label or a confirmation did, for the message after it."""
    version = "the task version"
    if feedback.get("quarantined"):
        return f"; consensus reached: {version} is quarantined for a curator to confirm"
    if feedback.get("already_quarantined"):
        return f"; consensus reached: {version} was already quarantined"
    if feedback.get("hack_example"):
        return "; consensus reached: added to the hack corpus and flagged reviewed_hack"
    if label in m.FEEDBACK_LABELS and feedback.get("decision") != label:
        if feedback.get("needed"):
            return (
                f"; nothing fed back yet: {feedback.get('agree', 1)} of the {feedback['needed']} "
                "reviewers the queue needs agree (or a curator confirms)"
            )
        return "; nothing fed back yet: this queue waits for a curator to confirm"
    return ""


@login_required
@require_POST
def review_item_confirm(request: HttpRequest, item_id: int) -> HttpResponse:
    """A curator decides an item's label: it feeds back whatever the reviewers' count."""
    item = _item_or_404(item_id)
    if not is_curator(request.user):
        raise PermissionDenied("only curators confirm review labels")
    form = ConfirmForm(request.POST, label_set=item.queue.label_set)
    if form.is_valid():
        try:
            item = services.review_item_confirm(
                item_id=item.pk,
                curator=request.user,
                label=form.cleaned_data["label"],
                note=form.cleaned_data["note"],
            )
        except InputError as exc:
            form_add_error(form, exc)
        else:
            label = form.cleaned_data["label"]
            said = _feedback_said(item.queue, {**item.feedback, "decision": label}, label)
            messages.success(
                request, f"item {item.position + 1} decided: {item.queue.label_title(label)}{said}"
            )
            return redirect("review-item", item_id=item.pk)
    return render(
        request,
        "review/item.html",
        _item_context(request, item, confirm_form=form),
        status=400,
    )


@login_required
@require_POST
def review_item_draft(request: HttpRequest, item_id: int) -> HttpResponse:
    """Turn the item's trajectory into a task draft (its reviewers and curators)."""
    item = _item_or_404(item_id)
    if not may_review(request.user):
        raise PermissionDenied("only reviewers and curators write task drafts")
    form = DraftForm(request.POST)
    if form.is_valid():
        try:
            draft = services.task_draft_create(
                trajectory_id=item.trajectory_id, created_by=request.user, **form.cleaned_data
            )
        except InputError as exc:
            form_add_error(form, exc)
        else:
            messages.success(
                request, f"task draft {draft.pk} ({draft.task_id}) saved; a curator submits it"
            )
            return redirect("review-draft", draft_id=draft.pk)
    return render(
        request,
        "review/item.html",
        _item_context(request, item, draft_form=form),
        status=400,
    )


@login_required
@console_read_page
def review_draft(request: HttpRequest, draft_id: int) -> HttpResponse:
    draft = get_object_or_404(
        m.TaskDraft.objects.select_related(
            "from_trajectory__run", "created_by", "task_version__task", "submitted_by"
        ),
        pk=draft_id,
    )
    items = m.ReviewItem.objects.filter(trajectory_id=draft.from_trajectory_id).order_by("id")
    return render(
        request,
        "review/draft.html",
        {"draft": draft, "can_submit": may_submit_drafts(request.user), "items": items},
    )


@login_required
@require_POST
def review_draft_submit(request: HttpRequest, draft_id: int) -> HttpResponse:
    """Submit a draft to the task library (curators); the importer's errors are shown, nothing
    half-written."""
    if not may_submit_drafts(request.user):
        raise PermissionDenied("only curators submit task drafts to the task library")
    get_object_or_404(m.TaskDraft, pk=draft_id)
    try:
        version = services.task_draft_submit(draft_id=draft_id, submitted_by=request.user)
    except InputError as exc:
        messages.error(request, f"not submitted: {exc}")
        return redirect("review-draft", draft_id=draft_id)
    messages.success(
        request,
        f"submitted as {version.task.task_id} v{version.number} (task set "
        f"{services.DRAFT_TASK_SET}); validate it before training on it",
    )
    return redirect(f"{reverse('task-detail', args=[version.task.task_id])}?v={version.number}")


@login_required
@console_read_page
def run_review_summary(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run's review: labels by kind, reviewer agreement, the verifier's precision and recall."""
    run = TrainingRun.objects.filter(pk=run_id).select_related("task_set").first()
    if run is None:
        raise Http404(f"run {run_id} does not exist")
    return render(
        request,
        "review/run.html",
        {
            "run": run,
            "summary": selectors.run_review_summary(run_id=run.pk),
            "can_manage": may_manage_queues(request.user),
        },
    )


@login_required
@console_read_page
def task_version_labels(request: HttpRequest, task_version_id: int) -> HttpResponse:
    """Every review label of a task version's trajectories, with what each fed back."""
    version = get_object_or_404(TaskVersion.objects.select_related("task"), pk=task_version_id)
    labels = list(selectors.task_version_labels(task_version_id=version.pk))
    return render(
        request,
        "review/task.html",
        {
            "version": version,
            "task": version.task,
            "labels": labels,
            "hack_examples": m.HackExample.objects.filter(task_version=version).select_related(
                "created_by"
            ),
            "drafts": m.TaskDraft.objects.filter(from_trajectory__task_version=version).order_by(
                "-id"
            ),
        },
    )
