"""Console pages. Thin: they call selectors and render."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView

from training import selectors
from training.models import StepMetric, TrainingRun


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness of the console; ``service`` lets a launcher tell it from another server."""
    return JsonResponse({"service": "crucible-console", "ok": True})


def run_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/run_list.html", {"runs": selectors.run_list()[:100]})


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = selectors.run_list().get(pk=run_id)
    except TrainingRun.DoesNotExist:
        raise Http404(f"run {run_id} does not exist") from None
    return render(request, "console/run_detail.html", {"run": run, "transitions": run.transitions.all()})


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = StepMetric
        fields = ["step", "reward_mean", "reward_histogram", "reward_bins", "metrics", "recorded_at"]


class RunStepsApi(ListAPIView):
    """A run's steps in order: binned reward histograms and scalar metrics."""

    serializer_class = StepSerializer

    def get_queryset(self):
        if not selectors.run_exists(run_id=self.kwargs["run_id"]):
            raise NotFound(f"run {self.kwargs['run_id']} does not exist")
        return selectors.run_steps(run_id=self.kwargs["run_id"])
