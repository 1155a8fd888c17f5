"""Console pages. Thin: they call selectors and render. Reading follows the console's rule
(:mod:`core.access`: anyone while ``CRUCIBLE_CONSOLE_PUBLIC`` is on, else users with a
role)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView

from console.review.selectors import review_queues_of
from console.run_table import RunTableQuery, duration_text, headers, run_rows
from core import health
from core.access import ConsoleRead, console_read_page
from core.errors import InputError
from core.permissions import may_launch_run, may_operate_run, role_of
from training import selectors
from training.models import Alert, StepMetric, TrainingRun
from training.selectors import alert_event, run_metric_names, warning_event
from training.services import alert_acknowledge as acknowledge
from training.services import run_update
from training.watch import progress_text


def healthz(request: HttpRequest) -> JsonResponse:
    """Health of the console: 200 ``{"service": "crucible-console", "ok": true, "checks":
    {"database": "ok", "redis": "ok"}}`` when everything a request needs answers, else 503 with
    ``ok`` false and why each failed check failed (:mod:`core.health`). ``service`` lets
    a launcher tell this console from another server on the port."""
    checks = health.checks()
    ok = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"service": "crucible-console", "ok": ok, "checks": checks}, status=200 if ok else 503
    )


def livez(request: HttpRequest) -> JsonResponse:
    """Liveness of this process: 200 ``{"service": "crucible-console", "ok": true}`` whenever it
    answers at all, whatever its dependencies say. Kubernetes restarts a pod whose liveness fails,
    and a restart cures nothing while Redis or the database is down, so the liveness probe asks
    this and the readiness probe asks :func:`healthz` (out of the Service until they are back)."""
    return JsonResponse({"service": "crucible-console", "ok": True})


# The console's icon: an ember on the brand's dark blue (the header's colours).
FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    b'<rect width="32" height="32" rx="7" fill="#1d2330"/>'
    b'<path d="M16 5c1 5 7 7 7 14a7 7 0 0 1-14 0c0-4 2-6 4-8 0 3 1 4 3 5-1-4 0-8 0-11z" '
    b'fill="#ffb347"/></svg>'
)


@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    """The console's icon (SVG), at ``/favicon.svg`` and at ``/favicon.ico`` where browsers look
    by default."""
    return HttpResponse(FAVICON, content_type="image/svg+xml")


def _refusal_page(request: HttpRequest, why: str) -> HttpResponse:
    """The 403 page: why, who is signed in with which roles, and ways back (the referring page
    when it is on this console, the start page, signing in as someone else)."""
    referer = request.headers.get("Referer", "")
    back_is_referer = bool(referer) and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    user = getattr(request, "user", None)
    roles = (
        sorted(user.groups.values_list("name", flat=True))
        if user is not None and user.is_authenticated
        else []
    )
    if user is not None and user.is_superuser:
        roles = ["admin", *roles]
    return render(
        request,
        "403.html",
        {
            "exception": why,
            "back": _path_of(referer) if back_is_referer else reverse("run-list"),
            "back_is_referer": back_is_referer,
            "roles": roles,
        },
        status=403,
    )


def _path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def permission_denied(request: HttpRequest, exception=None) -> HttpResponse:
    """``handler403``: every refused page (a view's ``PermissionDenied``) is a console page."""
    return _refusal_page(request, str(exception or "") or "Your account may not do this.")


def not_found(request: HttpRequest, exception=None) -> HttpResponse:
    """``handler404``: under ``/api/`` a JSON ``{"field": null, "error"}`` (a script reads every
    refusal the same way), elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"field": None, "error": f"no API operation or object at {request.path}"}, status=404
        )
    from django.views.defaults import page_not_found  # noqa: PLC0415 (Django's default)

    return page_not_found(request, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form sent without its token, or from a page open since before the
    last sign-in."""
    return _refusal_page(
        request,
        "The form was refused: its security token is missing or stale (the page was open from "
        "before a sign-in or sign-out). Go back, reload the page and send it again.",
    )


def landing_url(user) -> str:
    """Where ``user`` lands after signing in without a ``next``: the page their role works from.
    A reviewer: the newest queue with an item still open for them (else the review home); a
    curator: the task library; operators, admins and viewers: the runs."""
    role = role_of(user)
    if role == "reviewer":
        open_queue = next(
            (q for q in review_queues_of(user=user)[:50] if q.my_done < q.my_assigned), None
        )
        return (
            reverse("review-queue", args=[open_queue.pk]) if open_queue else reverse("review-home")
        )
    if role == "curator":
        return reverse("task-list")
    return reverse("run-list")


class LoginView(auth_views.LoginView):
    """The console's sign-in: back to ``next`` when given, else to the page the user's role works
    from (:func:`landing_url`)."""

    template_name = "tasks_library/login.html"

    def get_default_redirect_url(self) -> str:
        return landing_url(self.request.user)


RUN_TABLE_ROWS = 200


@console_read_page
def run_list(request: HttpRequest) -> HttpResponse:
    """The runs table: name, description, tags, launcher, status, duration, steps and the latest
    and best of chosen metrics, sorted and filtered by any column (:mod:`console.run_table`);
    tick runs to compare them. A bad filter is shown, naming it, and the table falls back to
    every run."""
    error = ""
    try:
        query = RunTableQuery.from_params(request.GET)
        runs = list(query.runs()[:RUN_TABLE_ROWS])
    except InputError as exc:
        error, query = str(exc), RunTableQuery()
        runs = list(query.runs()[:RUN_TABLE_ROWS])
    columns = query.metric_columns()
    rows = run_rows(runs, columns)
    for row in rows:
        row["duration"] = duration_text(row["duration_s"])
        row["columns"] = [
            (c, (row["metrics"][c["metric"]]["latest"], row["metrics"][c["metric"]]["best"]))
            for c in columns
        ]
    recent = list(selectors.run_list().values_list("pk", flat=True)[:RUN_TABLE_ROWS])
    return render(
        request,
        "console/run_list.html",
        {
            "rows": rows,
            "query": query,
            "columns": columns,
            "headers": headers(query, request.GET),
            "metrics_available": run_metric_names(run_ids=recent),
            "statuses": [value for value, _label in TrainingRun.STATUSES],
            "error": error,
            "filtered": bool(request.GET),
            "limit": RUN_TABLE_ROWS,
            "can_launch": may_launch_run(request.user),
        },
        status=400 if error else 200,
    )


@console_read_page
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = selectors.run_list().get(pk=run_id)
    except TrainingRun.DoesNotExist:
        raise Http404(f"run {run_id} does not exist") from None
    return render(
        request,
        "console/run_detail.html",
        {
            "run": run,
            "transitions": run.transitions.all(),
            "can_operate": may_operate_run(request.user),
            "terminal_statuses": TrainingRun.TERMINAL,
            "progress": (  # what the run does before its first step (the SFT warm start)
                progress_text(run.summary["progress"])
                if run.status == TrainingRun.RUNNING
                and (run.summary or {}).get("progress")
                and not run.steps.exists()
                else ""
            ),
            "reward_weights": (run.config or {}).get("reward_weights") or {"correctness": 1.0},
            "warnings": [warning_event(w) for w in run.warnings.all()],
            "agent_run": (run.config or {}).get("rollout_mode") == "agent",
        },
    )


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue the cancellation of a run (the Celery worker that launched it stops its trainer)."""
    # Imported here: training.tasks loads the kubernetes client, which the web does without.
    from training.tasks import run_cancel_task  # noqa: PLC0415

    if not may_operate_run(request.user):
        raise PermissionDenied("only curators and operators may cancel runs")
    run = TrainingRun.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404(f"run {run_id} does not exist")
    if run.is_terminal:
        messages.error(
            request, f"run {run_id} already ended {run.status}; there is nothing to cancel"
        )
    else:
        run_cancel_task.delay(run_id, f"cancelled by {request.user.get_username()} in the console")
        messages.success(
            request, f"cancelling run {run_id}: its trainer stops and its backend is cleaned up"
        )
    return redirect("run-detail", run_id=run_id)


@login_required
@require_POST
def run_edit(request: HttpRequest, run_id: int) -> HttpResponse:
    """Rename, describe or retag a run from its page (curators and operators)."""
    if not TrainingRun.objects.filter(pk=run_id).exists():
        raise Http404(f"run {run_id} does not exist")
    try:
        run_update(
            run_id=run_id,
            user=request.user,
            name=request.POST.get("name", ""),
            description=request.POST.get("description", ""),
            tags=request.POST.get("tags", ""),
        )
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"run {run_id} updated")
    return redirect("run-detail", run_id=run_id)


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = StepMetric
        fields = [
            "step",
            "reward_mean",
            "reward_histogram",
            "reward_bins",
            "metrics",
            "recorded_at",
        ]


class RunStepsApi(ListAPIView):
    """A run's steps in order: binned reward histograms and scalar metrics."""

    serializer_class = StepSerializer
    permission_classes = [ConsoleRead]

    def get_queryset(self):
        if not selectors.run_exists(run_id=self.kwargs["run_id"]):
            raise NotFound(f"run {self.kwargs['run_id']} does not exist")
        return selectors.run_steps(run_id=self.kwargs["run_id"])


@login_required
@require_POST
def alert_acknowledge(request: HttpRequest, run_id: int, alert_id: int) -> HttpResponse:
    """Acknowledge a drift alert with a note (curators and operators). Answers JSON (the alert's
    event) to a client that accepts it, else redirects to the run page; watchers get the update
    live."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    if not Alert.objects.filter(pk=alert_id, run_id=run_id).exists():
        raise Http404(f"run {run_id} has no alert {alert_id}")
    try:
        alert = acknowledge(alert_id=alert_id, user=request.user, note=request.POST.get("note", ""))
    except PermissionDenied as exc:
        if wants_json:
            return JsonResponse({"error": str(exc)}, status=403)
        raise
    except ValueError as exc:
        if wants_json:
            return JsonResponse({"error": str(exc)}, status=400)
        messages.error(request, str(exc))
        return redirect("run-detail", run_id=run_id)
    if wants_json:
        return JsonResponse(alert_event(alert))
    messages.success(request, f"alert {alert_id} acknowledged")
    return redirect("run-detail", run_id=run_id)
