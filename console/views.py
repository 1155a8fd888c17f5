"""Console pages. Thin: they call selectors and render. Reading follows the console's rule
(:mod:`console.core.access`: anyone while ``CRUCIBLE_CONSOLE_PUBLIC`` is on, else users with a
role)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView

from console.core.access import ConsoleRead, console_read_page
from console.core.permissions import may_operate_run
from training import selectors
from training.models import Alert, StepMetric, TrainingRun
from training.selectors import alert_event
from training.services import alert_acknowledge as acknowledge


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness of the console; ``service`` lets a launcher tell it from another server."""
    return JsonResponse({"service": "crucible-console", "ok": True})


@console_read_page
def run_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/run_list.html", {"runs": selectors.run_list()[:100]})


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
            "can_cancel": may_operate_run(request.user) and not run.is_terminal,
        },
    )


@login_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Queue the cancellation of a run (the Celery worker that launched it stops its trainer)."""
    # Imported here: training.tasks loads the kubernetes client, which the web does without.
    from training.tasks import run_cancel_task  # noqa: PLC0415

    if not may_operate_run(request.user):
        return HttpResponseForbidden("only curators and operators may cancel runs")
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
        return HttpResponseForbidden(str(exc))
    except ValueError as exc:
        if wants_json:
            return JsonResponse({"error": str(exc)}, status=400)
        messages.error(request, str(exc))
        return redirect("run-detail", run_id=run_id)
    if wants_json:
        return JsonResponse(alert_event(alert))
    messages.success(request, f"alert {alert_id} acknowledged")
    return redirect("run-detail", run_id=run_id)
