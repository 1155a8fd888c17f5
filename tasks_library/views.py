"""Curation pages: task list with bulk actions, task page with report and diff, edit form, task
sets.

Thin: forms check input, selectors read, services write (with the signed-in user as
author). Every page needs a signed-in user; writes need a curator
(:func:`core.permissions.is_curator`), otherwise 403.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from core.access import console_read_page
from core.errors import InputError, form_add_error
from core.permissions import is_curator
from tasks_library.difficulty import pass_rate
from tasks_library.forms import (
    CurationForm,
    FilterForm,
    PinForm,
    VersionCurationForm,
    edit_form_class,
    first_error,
)
from tasks_library.highlight import highlighted_lines
from tasks_library.models import Task, TaskSet, TaskVersion, ValidationJob
from tasks_library.selectors import (
    SUMMARY_DEFERRED,
    WorkspacePathNotFound,
    repository_test_results,
    task_set_versions,
    task_sets_with_sizes,
    task_sources,
    task_version_summaries,
    task_versions_diff,
    task_versions_light,
    trainable,
    workspace_browse,
)
from tasks_library.services import (
    task_set_pin,
    task_version_edit,
    task_versions_approve,
    task_versions_quarantine,
)
from tasks_library.tasks import validation_job_start

PAGE_SIZE = 50


def _require_curator(request: HttpRequest) -> None:
    if not is_curator(request.user):
        raise PermissionDenied("only curators may change the task library")


def _rows(versions) -> list[tuple[TaskVersion, object]]:
    return [(v, pass_rate(v)) for v in versions]


def _task_detail_url(task_id: str, **query) -> str:
    url = reverse("task-detail", args=[task_id])
    return f"{url}?{urlencode(query)}" if query else url


@login_required
@console_read_page
@require_http_methods(["GET", "POST"])
def task_list(request: HttpRequest) -> HttpResponse:
    """GET: the latest version of every task, filtered, 50 a page. POST: a bulk
    quarantine/approve."""
    if request.method == "POST":
        return _curate(request)
    form = FilterForm(request.GET)
    versions = form.versions() if form.is_valid() else TaskVersion.objects.none()
    page = Paginator(versions, PAGE_SIZE).get_page(request.GET.get("page"))
    query = urlencode(form.active())
    return render(
        request,
        "tasks_library/task_list.html",
        {
            "form": form,
            "page": page,
            "rows": _rows(page),
            "query": query,
            "curator": is_curator(request.user),
            "sources": task_sources(),
            "job": _job_of(request),
        },
    )


def _curate(request: HttpRequest) -> HttpResponse:
    _require_curator(request)
    form = CurationForm(request.POST)
    if not form.is_valid():
        messages.error(request, first_error(form)[1])
    else:
        action, ids, reason = (
            form.cleaned_data["action"],
            form.cleaned_data["ids"],
            form.cleaned_data["reason"],
        )
        if action == "validate":
            return _validate_selected(request, ids)
        service = task_versions_quarantine if action == "quarantine" else task_versions_approve
        try:
            changed = service(version_ids=ids, author=request.user.get_username(), reason=reason)
        except InputError as exc:
            messages.error(request, str(exc))
        else:
            done = "quarantined" if action == "quarantine" else "approved"
            messages.success(
                request, f"{done} {changed} task version{'s' if changed != 1 else ''}: {reason}"
            )
    filters = FilterForm(request.POST)
    query = urlencode(filters.active())
    return redirect(f"{reverse('task-list')}?{query}" if query else reverse("task-list"))


def _validate_selected(request: HttpRequest, ids: list[int]) -> HttpResponse:
    """The bulk bar's "validate": one job for the selected versions, followed on the list."""
    filters = FilterForm(request.POST)
    query = filters.active()
    what = f"{len(ids)} task version{'s' if len(ids) != 1 else ''}"
    try:
        job = _validation_started(request, ids, what)
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        query = {**query, "job": job.pk}
    return redirect(f"{reverse('task-list')}?{urlencode(query)}")


def _validation_started(request: HttpRequest, ids: list[int], what: str) -> ValidationJob:
    """Start a validation job of ``ids`` as the signed-in curator and say so (or why it could
    not be queued); the page then follows the job live.

    Raises:
        InputError: (``ids``) none, or an unknown version.
    """
    job = validation_job_start(version_ids=ids, options={}, author=request.user.get_username())
    if job.status == ValidationJob.FAILED:
        messages.error(request, f"could not enqueue validation: {job.error}")
    else:
        messages.success(
            request,
            f"validation of {what} enqueued (job {job.pk}); its progress and verdicts appear "
            "here as a worker runs it",
        )
    return job


def _job_of(request: HttpRequest) -> ValidationJob | None:
    """The validation job named by ``?job=`` (the page follows it live), if any."""
    raw = request.GET.get("job", "")
    return ValidationJob.objects.filter(pk=int(raw)).first() if raw.isdigit() else None


def _parse_diff(spec: str, numbers: set[int]) -> tuple[int, int]:
    """``"1..3"`` as (1, 3). Raises ValueError with a message for the page."""
    old, sep, new = spec.partition("..")
    if not (sep and old.isdigit() and new.isdigit()):
        raise ValueError(f"diff: write it as <old>..<new>, e.g. ?diff=1..2 (got {spec!r})")
    old_n, new_n = int(old), int(new)
    for n in (old_n, new_n):
        if n not in numbers:
            raise ValueError(
                f"diff: this task has no version {n} (versions: "
                f"{', '.join(map(str, sorted(numbers)))})"
            )
    return old_n, new_n


def _diff_lines(diff: str) -> list[tuple[str, str]]:
    """Each line of a unified diff with its CSS class: add, del, hunk, head or ctx."""
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


def _hunk_targets(lines: list[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """A patch's lines (:func:`_diff_lines`) with, on each hunk header, where it starts in the
    task's own files: ``(kind, line, path, "Lfirst-Llast")`` (``""`` twice elsewhere), the old
    side's lines, since the workspace holds the files before the patch."""
    out, path = [], ""
    for kind, line in lines:
        target = anchor = ""
        if kind == "head" and line.startswith("--- ") and line[4:] != "/dev/null":
            path = line[4:].removeprefix("a/").split("\t")[0]
        elif kind == "hunk" and path:
            match = HUNK.match(line)
            if match:
                first = max(int(match["start"]), 1)
                last = first + max(int(match["count"] or 1), 1) - 1
                target, anchor = path, f"L{first}" + (f"-L{last}" if last > first else "")
        out.append((kind, line, target, anchor))
    return out


HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<count>\d+))? \+")


@login_required
@console_read_page
def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    """A task's versions, the selected one (``?v=N``, default latest) in full, and
    ``?diff=A..B``; a repository task's page browses its workspace at ``?path=``."""
    task = get_object_or_404(Task, task_id=task_id)
    versions = list(task_version_summaries(task=task))
    if not versions:
        raise Http404(f"task {task_id} has no version")
    numbers = {v.number for v in versions}
    selected = request.GET.get("v", "")
    number = int(selected) if selected.isdigit() else versions[-1].number
    if number not in numbers:
        raise Http404(f"task {task_id} has no version {selected}")
    version = task_versions_light().get(task=task, number=number)
    version.task = task
    context = {
        "task": task,
        "versions": versions,
        "version": version,
        "rate": pass_rate(version),
        "report_json": json.dumps(version.report, indent=1, sort_keys=True),
        "curator": is_curator(request.user),
        "diff_error": "",
        "diff": None,
        "job": _job_of(request),
    }
    if version.is_repository:
        context["repository"] = _repository_context(version, request.GET.get("path", ""))
    if request.GET.get("diff"):
        try:
            old_n, new_n = _parse_diff(request.GET["diff"], numbers)
        except ValueError as exc:
            context["diff_error"] = str(exc)
        else:
            pair = {
                v.number: v
                for v in task_versions_light().filter(task=task, number__in=[old_n, new_n])
            }
            changes = task_versions_diff(old=pair[old_n], new=pair[new_n])
            context["diff"] = {
                "old": old_n,
                "new": new_n,
                "changes": [
                    {"field": c["field"], "lines": _diff_lines(c["diff"])} for c in changes
                ],
            }
    return render(request, "tasks_library/task_detail.html", context)


def _repository_context(version: TaskVersion, path: str) -> dict:
    """A repository version's page parts: the file browser at ``path`` (``?path=``), the ids with
    their last validation results, the reference patch as diff lines."""
    try:
        browse, browse_error = workspace_browse(workspace=version.workspace, path=path), ""
    except WorkspacePathNotFound as exc:
        browse, browse_error = workspace_browse(workspace=version.workspace, path=""), str(exc)
    if browse["kind"] == "file" and browse["text"] is not None:
        browse["lines"] = highlighted_lines(browse["path"], browse["text"])
    return {
        "browse": browse,
        "browse_error": browse_error,
        "tests": repository_test_results(version=version),
        "patch_lines": _hunk_targets(_diff_lines(version.reference_solution)),
        "hidden_paths": version.test_suite.hidden_files.paths()
        if version.test_suite.hidden_files
        else [],
    }


@login_required
@console_read_page
@require_POST
def task_curate(request: HttpRequest, task_id: str) -> HttpResponse:
    """Quarantine (again: a curator's confirmation, with their reason) or approve one version of a
    task, any of them, from its page; back to that version."""
    _require_curator(request)
    task = get_object_or_404(Task, task_id=task_id)
    form = VersionCurationForm(request.POST)
    if not form.is_valid():
        messages.error(request, first_error(form)[1])
        return redirect(_task_detail_url(task.task_id))
    number, action = form.cleaned_data["number"], form.cleaned_data["action"]
    version = task.versions.filter(number=number).first()
    if version is None:
        raise Http404(f"task {task_id} has no version {number}")
    was_quarantined = version.quarantined
    service = task_versions_quarantine if action == "quarantine" else task_versions_approve
    try:
        service(
            version_ids=[version.pk],
            author=request.user.get_username(),
            reason=form.cleaned_data["reason"],
        )
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        done = {
            ("quarantine", False): "quarantined",
            ("quarantine", True): "quarantine confirmed for",
        }.get((action, was_quarantined), "approved")
        messages.success(request, f"{done} {task.task_id} v{number}: {form.cleaned_data['reason']}")
    return redirect(_task_detail_url(task.task_id, v=number))


@login_required
@console_read_page
@require_POST
def task_validate(request: HttpRequest, task_id: str) -> HttpResponse:
    """Enqueue validation of one version (``number`` in the form, default latest) on Celery."""
    _require_curator(request)
    task = get_object_or_404(Task, task_id=task_id)
    raw = request.POST.get("number", "")
    versions = task.versions.order_by("-number")
    version = (versions.filter(number=int(raw)) if raw.isdigit() else versions).first()
    if version is None:
        raise Http404(f"task {task_id} has no version {raw}")
    job = _validation_started(request, [version.pk], f"{task.task_id} v{version.number}")
    return redirect(_task_detail_url(task.task_id, v=version.number, job=job.pk))


@login_required
@console_read_page
@require_http_methods(["GET", "POST"])
def task_edit(request: HttpRequest, task_id: str) -> HttpResponse:
    """The latest version's content in a form; a valid submit creates a new version and redirects to
    it."""
    _require_curator(request)
    task = get_object_or_404(Task, task_id=task_id)
    latest = task.versions.select_related("test_suite", "environment").order_by("-number").first()
    if latest is None:
        raise Http404(f"task {task_id} has no version")
    form_class = edit_form_class(latest)
    if request.method == "GET":
        form = form_class(initial=form_class.initial_for(latest))
    else:
        form = form_class(request.POST)
        if form.is_valid():
            base = (
                task.versions.select_related("test_suite", "environment")
                .filter(number=form.cleaned_data["base"])
                .first()
            )
            if base is None:
                form.add_error(
                    None, f"base: task {task_id} has no version {form.cleaned_data['base']}"
                )
            else:
                changes = form.changes(base)
                try:
                    new = task_version_edit(
                        version=base,
                        author=request.user.get_username(),
                        change_note=form.cleaned_data["change_note"],
                        **changes,
                    )
                except InputError as exc:
                    form_add_error(form, exc)
                else:
                    messages.success(
                        request,
                        f"created {task.task_id} v{new.number} ({new.version}); "
                        "it is pending validation",
                    )
                    return redirect(
                        _task_detail_url(
                            task.task_id, v=new.number, diff=f"{base.number}..{new.number}"
                        )
                    )
    return render(
        request, "tasks_library/task_edit.html", {"task": task, "latest": latest, "form": form}
    )


@login_required
@console_read_page
@require_http_methods(["GET", "POST"])
def taskset_list(request: HttpRequest) -> HttpResponse:
    """GET: the task sets. POST (curators): pin the versions matching a filter as a set, new or
    existing."""
    if request.method == "POST":
        return _pin(request)
    return render(
        request,
        "tasks_library/taskset_list.html",
        {
            "task_sets": task_sets_with_sizes(),
            "curator": is_curator(request.user),
            "form": FilterForm(),
            "sources": task_sources(),
        },
    )


def _pin(request: HttpRequest) -> HttpResponse:
    _require_curator(request)
    pin, filters = PinForm(request.POST), FilterForm(request.POST)
    back = reverse("taskset-list")
    if request.POST.get("back") == "tasks":
        back = reverse("task-list")
    elif (
        request.POST.get("back") == "set"
        and TaskSet.objects.filter(name=request.POST.get("name", "")).exists()
    ):
        back = reverse("taskset-detail", args=[request.POST["name"]])
    if not pin.is_valid() or not filters.is_valid():
        messages.error(request, first_error(pin if not pin.is_valid() else filters)[1])
        return redirect(back)
    chosen = filters.versions()
    versions = list(trainable(chosen) if pin.cleaned_data["trainable_only"] else chosen)
    if not versions:
        messages.error(request, "no task version matches this filter; nothing pinned")
        return redirect(back)
    name = pin.cleaned_data["name"]
    task_set_pin(
        name=name,
        versions=versions,
        description=pin.cleaned_data["description"],
        author=request.user.get_username(),
        change_note=pin.cleaned_data["change_note"],
    )
    messages.success(request, f"task set {name} pins {len(versions)} task versions")
    return redirect("taskset-detail", name=name)


@login_required
@console_read_page
def taskset_detail(request: HttpRequest, name: str) -> HttpResponse:
    """A task set's pinned versions in order and its version history, with a re-pin form for
    curators."""
    task_set = get_object_or_404(task_sets_with_sizes(), name=name)
    pinned = task_set_versions(task_set=task_set).defer(*SUMMARY_DEFERRED)
    return render(
        request,
        "tasks_library/taskset_detail.html",
        {
            "task_set": task_set,
            "rows": _rows(pinned),
            "history": task_set.versions.order_by("-number"),
            "curator": is_curator(request.user),
            "form": FilterForm(),
            "sources": task_sources(),
        },
    )
