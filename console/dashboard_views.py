"""The live dashboard's other pages: launch and resume runs, compare runs, the sandbox pool.

Thin, as the other console views: they check who asks, call selectors and services, render.

* ``/runs/new/`` (``run-launch``): a form (``console/launch_form.py``: the rollout mode and key
  settings as fields with their ranges, every other key in the raw config) that creates a run
  (``training.services.run_create``) and queues its launch (``training.tasks.run_launch``),
  checked by ``RunConfig.from_dict`` and the launch checks (an error names the key and creates
  nothing).
* ``/runs/<id>/resume/`` (``run-resume``, POST): an ``interrupted`` run goes back to
  ``launching`` (``training.services.run_resume``) and its launch is queued.
* ``/runs/compare/?runs=1,2`` (``run-compare``): runs' curves on shared axes.
* ``/sandboxes/`` (``sandbox-pool``) and ``/api/sandboxes/pool/`` (``api-sandbox-pool``, JSON):
  workers busy and idle, queue depth, latency percentiles and statuses per runtime.
* ``/api/runs/<id>/components/?first=A&last=B`` (``api-run-components``, JSON): per-component
  reward histograms of steps A..B (the run page asks for them when its slider reaches steps
  the back-fill sent summed).
* ``/api/runs/<id>/metrics/?name=A&name=B`` (``api-run-metrics``, JSON): any recorded metrics step
  by step, binned past 1,000 steps (the metric pickers of the run and compare pages).

Launching needs ``training.add_trainingrun``, resuming ``training.change_trainingrun``; curators
(``core.permissions.is_curator``) and superusers may do both. Others get 403. Reading
follows the console's read rule (:mod:`core.access`).
"""

from __future__ import annotations

import redis
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.launch_form import RunLaunchForm
from core.access import console_read_json, console_read_page, page_refusal
from core.errors import InputError, form_add_error
from core.permissions import may_launch_run, may_operate_run, may_read_console
from sandboxes.pool_stats import pool_stats
from training import selectors
from training.models import TrainingRun
from training.services import InvalidTransition, run_create
from training.services import run_resume as resume

# One colour per run on the comparison page (plotly's default cycle, readable on white).
RUN_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]
COMPARE_MAX_RUNS = len(RUN_COLOURS)


# --- launch -----------------------------------------------------------------------------


def run_launch(request: HttpRequest) -> HttpResponse:
    """``GET``: the launch form; ``POST``: create the run and queue its launch, or show the
    errors."""
    # Imported here: training.tasks loads the kubernetes client, which the web does without.
    from training.tasks import run_launch as run_launch_task  # noqa: PLC0415

    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not may_launch_run(request.user):
        raise PermissionDenied(
            "only curators and operators (training.add_trainingrun) may launch runs"
        )
    form = RunLaunchForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            run = run_create(
                task_set=form.cleaned_data["task_set"],
                config=form.cleaned_data["run_config"],
                backend=form.cleaned_data["backend"],
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                tags=form.cleaned_data["tags"],
                launched_by=request.user.get_username(),
            )
        except InputError as exc:  # a bad name, description or tags
            form_add_error(form, exc)
        except ValueError as exc:  # an empty or unvalidated task set, an unusable held-out set
            message = str(exc)
            form.add_error("config" if message.startswith("config key") else "task_set", message)
        else:
            run_launch_task.delay(run.pk)
            messages.success(
                request,
                f"run {run.pk} created on task set {run.task_set.name!r} "
                f"({run.total_steps} steps, {run.backend}); its launch is queued",
            )
            return redirect("run-detail", run_id=run.pk)
    return render(
        request, "console/run_launch.html", {"form": form}, status=400 if form.errors else 200
    )


@login_required
@require_POST
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    """Resume an ``interrupted`` run: back to ``launching``, then its launch is queued."""
    # Imported here: training.tasks loads the kubernetes client, which the web does without.
    from training.tasks import run_launch as run_launch_task  # noqa: PLC0415

    if not may_operate_run(request.user):
        raise PermissionDenied(
            "only curators and operators (training.change_trainingrun) may resume runs"
        )
    if not TrainingRun.objects.filter(pk=run_id).exists():
        raise Http404(f"run {run_id} does not exist")
    try:
        attempt = resume(
            run_id=run_id, reason=f"resumed by {request.user.get_username()} in the console"
        )
    except InvalidTransition as exc:
        messages.error(request, str(exc))
    else:
        run_launch_task.delay(run_id)
        messages.success(
            request, f"resuming run {run_id} (attempt {attempt}) from its last checkpoint"
        )
    return redirect("run-detail", run_id=run_id)


# --- compare ------------------------------------------------------------------------------


def _run_ids(raw: str) -> list[int]:
    ids = []
    for part in (raw or "").replace(" ", ",").split(","):
        if part.strip():
            try:
                value = int(part)
            except ValueError:
                raise Http404(f"{part!r} is not a run id") from None
            if value not in ids:
                ids.append(value)
    return ids


@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    """Runs' curves on shared axes (``?runs=1,2``); without two runs, a picker. The console's read
    rule is checked for each run asked for (object permissions), or in general without one."""
    ids = _run_ids(request.GET.get("runs", "") or ",".join(request.GET.getlist("run")))
    if not all(may_read_console(request.user, pk) for pk in ids or [None]):
        return page_refusal(request)
    recent = selectors.run_list()[:50]
    if len(ids) < 2:
        return render(
            request, "console/run_compare.html", {"runs": [], "recent": recent, "chosen": ids}
        )
    if len(ids) > COMPARE_MAX_RUNS:
        ids = ids[:COMPARE_MAX_RUNS]
        messages.info(request, f"comparing the first {COMPARE_MAX_RUNS} runs")
    runs = {run.pk: run for run in selectors.run_list().filter(pk__in=ids)}
    missing = [pk for pk in ids if pk not in runs]
    if missing:
        raise Http404(f"no run {', '.join(map(str, missing))}")
    data = [
        {
            "id": pk,
            "label": f"{runs[pk].title} · {runs[pk].task_set.name} · {runs[pk].status}",
            "colour": RUN_COLOURS[i],
            "reward": selectors.reward_formula(runs[pk].config),
            "curves": selectors.run_curves(run_id=pk),
        }
        for i, pk in enumerate(ids)
    ]
    ordered = [runs[pk] for pk in ids]
    config_rows = selectors.runs_config_table(ordered)
    return render(
        request,
        "console/run_compare.html",
        {
            "runs": ordered,
            "compare_data": data,
            "recent": recent,
            "chosen": ids,
            "colours": dict(zip(ids, RUN_COLOURS)),
            "config_rows": config_rows,
            "differences": [row for row in config_rows if row["differs"]],
            "rewards_differ": len({item["reward"] for item in data}) > 1,
            "metric_names": selectors.run_metric_names(run_ids=ids),
        },
    )


# --- reward components of a span of steps --------------------------------------------------------


@require_GET
@console_read_json
def run_components_api(request: HttpRequest, run_id: int) -> JsonResponse:
    """``{"run", "first", "last", "components": {name: [10 counts]}, "steps": {...}}`` for steps
    ``first..last`` (at most ``training.selectors.COMPONENT_SPAN_MAX``), ``steps`` being
    ``{step: {name: counts}}``; ``sum=1`` leaves ``steps`` out and only sums the span."""
    if not selectors.run_exists(run_id=run_id):
        return JsonResponse({"error": f"run {run_id} does not exist"}, status=404)
    try:
        first, last = int(request.GET["first"]), int(request.GET["last"])
    except (KeyError, ValueError):
        return JsonResponse(
            {"error": "give first and last: the span of steps, e.g. ?first=1&last=20"}, status=400
        )
    names = selectors.run_component_names(run_id=run_id)
    try:
        per_step = selectors.step_component_histograms(
            run_id=run_id, first=first, last=last, names=names
        )
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    total = {name: [0] * 10 for name in names}
    for histograms in per_step.values():
        for name, counts in histograms.items():
            total[name] = [a + b for a, b in zip(total[name], counts)]
    answer = {"run": run_id, "first": first, "last": last, "components": total}
    if request.GET.get("sum") != "1":
        answer["steps"] = {str(step): histograms for step, histograms in sorted(per_step.items())}
    return JsonResponse(answer)


# --- any recorded metric, for the metric pickers ------------------------------------------------


@require_GET
@console_read_json
def run_metrics_api(request: HttpRequest, run_id: int) -> JsonResponse:
    """``?name=A&name=B`` (at most ``training.selectors.METRIC_SERIES_MAX``): those metrics of
    run ``run_id`` step by step (:func:`training.selectors.run_metric_series`), and ``names``:
    every metric the run records (the pickers' choices)."""
    if not selectors.run_exists(run_id=run_id):
        return JsonResponse({"error": f"run {run_id} does not exist"}, status=404)
    names = [name.strip() for name in request.GET.getlist("name") if name.strip()]
    if len(names) > selectors.METRIC_SERIES_MAX or any(len(name) > 200 for name in names):
        return JsonResponse(
            {
                "field": "name",
                "error": f"name: at most {selectors.METRIC_SERIES_MAX} metric names of at most "
                "200 characters each",
            },
            status=400,
        )
    answer = selectors.run_metric_series(run_id=run_id, names=names)
    answer["names"] = selectors.run_metric_names(run_ids=[run_id])
    return JsonResponse(answer)


# --- the sandbox pool -----------------------------------------------------------------------------


def pool_runtime_state(stats: dict) -> str:
    """What one runtime's pool row means (``sandboxes.pool_stats.runtime_stats``):

    * ``serving``: live workers;
    * ``unused``: no live worker and nothing for one to do (no request queued or in flight, no
      trainer announcing demand): Node.js on a Python-only setup, shown grey, not as an alarm;
    * ``starved``: work waits and no live worker takes it (red).
    """
    if stats["workers"]["alive"]:
        return "serving"
    waiting = (
        stats["queue_depth"] + stats["in_flight"] + (stats.get("demand") or {}).get("total", 0)
    )
    return "starved" if waiting else "unused"


@require_GET
@console_read_json
def sandbox_pool_api(request: HttpRequest) -> JsonResponse:
    """The pool statistics (``sandboxes.pool_stats.pool_stats``) as JSON, each runtime with its
    ``state`` (:func:`pool_runtime_state`); 503 when Redis is down."""
    try:
        stats = pool_stats()
    except (redis.RedisError, OSError) as exc:
        return JsonResponse({"error": f"Redis does not answer: {exc}"}, status=503)
    for runtime in stats["runtimes"].values():
        runtime["state"] = pool_runtime_state(runtime)
    return JsonResponse(stats)


@require_GET
@console_read_page
def sandbox_pool(request: HttpRequest) -> HttpResponse:
    """The sandbox pool page (the same panel as on the run page, polled every few seconds)."""
    return render(request, "console/sandbox_pool.html", {})
