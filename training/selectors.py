"""Reads about training runs."""

from __future__ import annotations

import difflib
import json
from datetime import timedelta

from django.db import connection
from django.db.models import (
    Avg,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Now
from django.utils import timezone

from core.errors import InputError
from core.packed import PackedLength
from training import flags, run_warnings
from training.models import (
    REWARD_BINS,
    Alert,
    HeldOutEvaluation,
    MonitorScore,
    RunWarning,
    StepMetric,
    TrainingRun,
    Trajectory,
    Turn,
)


def run_exists(*, run_id: int) -> bool:
    return TrainingRun.objects.filter(pk=run_id).exists()


def run_list() -> QuerySet[TrainingRun]:
    """Runs, newest first, with their task set loaded."""
    return TrainingRun.objects.select_related("task_set").order_by("-id")


def run_steps(*, run_id: int, after: int = 0) -> QuerySet[StepMetric]:
    """A run's steps with ``step > after``, in order."""
    return StepMetric.objects.filter(run_id=run_id, step__gt=after).order_by("step")


def step_event(step: StepMetric, *, timeline: bool = True) -> dict:
    """The wire form of a step: binned histogram and scalars, never raw rewards; with ``timeline``
    (when the trainer recorded one) the step's phases and sandbox pool samples
    (:meth:`training.phase.PhaseTracker.take_step`), which the run page's pool chart draws."""
    event = {
        "kind": "step",
        "seq": step.step,
        "step": step.step,
        "reward_mean": step.reward_mean,
        "histogram": step.reward_histogram,
        "bins": step.reward_bins,
        "metrics": step.metrics,
    }
    if timeline and step.timeline:
        event["timeline"] = step.timeline
    return event


def warning_event(warning: RunWarning) -> dict:
    """The wire form of a run warning (``training/run_warnings.py``): the client keeps one entry
    per ``id`` and replaces it with each newer event of that id."""
    return {
        "kind": "warning",
        "id": warning.pk,
        "run_id": warning.run_id,
        "warning": warning.kind,
        "title": run_warnings.KINDS.get(warning.kind, warning.kind.replace("_", " ")),
        "message": warning.message,
        "details": warning.details,
        "first_step": warning.first_step,
        "last_step": warning.last_step,
        "steps": warning.steps,
        "updated_at": warning.updated_at.isoformat() if warning.updated_at else None,
    }


def run_warnings_of(*, run_ids: list[int]) -> dict[int, list[RunWarning]]:
    """Each run's warnings (oldest first), in one query: ``{run id: [RunWarning]}``."""
    out: dict[int, list[RunWarning]] = {}
    for warning in RunWarning.objects.filter(run_id__in=run_ids).order_by("id"):
        out.setdefault(warning.run_id, []).append(warning)
    return out


def run_row_event(run: TrainingRun, *, step_metrics: dict | None = None) -> dict:
    """The runs table's live event of one run: ``{"kind": "run_row", "id", "status",
    "status_reason", "steps_done", "total_steps", "started_at", "finished_at", "duration_s",
    "metrics", "warnings"}``; ``metrics`` the step just recorded (with its ``step``), or ``{}``
    when the row changed otherwise; ``warnings`` ``[{"kind", "title", "message"}]``. Two
    queries."""
    steps_done = StepMetric.objects.filter(run_id=run.pk).aggregate(last=Max("step"))["last"]
    end = (run.finished_at or timezone.now()) if run.started_at else None
    return {
        "kind": "run_row",
        "id": run.pk,
        "status": run.status,
        "status_reason": run.status_reason,
        "steps_done": steps_done or 0,
        "total_steps": run.total_steps,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "duration_s": round((end - run.started_at).total_seconds(), 1) if end else None,
        "metrics": step_metrics or {},
        "warnings": [
            {"kind": w.kind, "title": warning_event(w)["title"], "message": w.message}
            for w in run_warnings_of(run_ids=[run.pk]).get(run.pk, [])
        ],
    }


def evaluation_event(evaluation) -> dict:
    """The wire form of a held-out evaluation: pass@k and mean reward at a step."""
    return {
        "kind": "evaluation",
        "step": evaluation.step,
        "pass_at_k": evaluation.pass_at_k,
        "reward_mean": evaluation.reward_mean,
        "tasks": evaluation.tasks,
    }


def run_backfill(*, run_id: int, after: int) -> list[dict]:
    """The events a client that has seen up to ``after`` missed: the run's status, then steps."""
    run = TrainingRun.objects.get(pk=run_id)
    events = [{"kind": "status", "status": run.status, "reason": run.status_reason}]
    events += [step_event(step) for step in run_steps(run_id=run_id, after=after)]
    events += [evaluation_event(e) for e in run.evaluations.all()]  # few: every eval_every steps
    events += [
        alert_event(alert) for alert in run_alerts(run_id=run_id)
    ]  # all: alerts change after they are raised
    return events


# --- trajectories: the list, one trajectory, its turns (the replay pages) ----------

# Sort keys of :func:`trajectory_list`: what a user picks -> the ordering (ties by id).
TRAJECTORY_SORTS = {
    "step": ("step", "group", "index_in_group", "id"),
    "-step": ("-step", "group", "index_in_group", "id"),
    "reward": ("reward", "id"),
    "-reward": ("-reward", "id"),
    "newest": ("-id",),
}


def _has_flag(queryset: QuerySet[Trajectory], flag: str) -> QuerySet[Trajectory]:
    """Trajectories whose ``flags`` list holds ``flag``: JSON containment where the
    database has it (PostgreSQL), else a match on the list's JSON text (SQLite)."""
    if connection.features.supports_json_field_contains:
        return queryset.filter(flags__contains=[flag])
    return queryset.annotate(_flags_text=Cast("flags", TextField())).filter(
        _flags_text__contains=json.dumps(flag)
    )


def trajectory_list(
    *,
    run_id: int | None = None,
    step_min: int | None = None,
    step_max: int | None = None,
    task: str = "",
    reward_min: float | None = None,
    reward_max: float | None = None,
    flag: str = "",
    status: str = "",
    sort: str = "step",
) -> QuerySet[Trajectory]:
    """Trajectories matching the filters, with their task loaded and ``turn_count`` and
    ``monitor_max`` (the highest monitor score, or None) annotated; bulky columns deferred.

    Args:
        task: a substring of the task id (``HumanEval/1``), case-insensitive.
        flag: ``""`` for any trajectory, ``"any"`` for flagged ones, ``"none"`` for
            unflagged ones, else the name of a flag the trajectory must carry.
        sort: a key of :data:`TRAJECTORY_SORTS`.
    """
    queryset = Trajectory.objects.select_related("task_version__task").defer(
        "prompt_token_ids",
        "final_code",
        "flag_evidence",
        "task_version__prompt",
        "task_version__reference_solution",
        "task_version__files",
        "task_version__report",
        "task_version__verdict_reasons",
    )
    if run_id is not None:
        queryset = queryset.filter(run_id=run_id)
    if step_min is not None:
        queryset = queryset.filter(step__gte=step_min)
    if step_max is not None:
        queryset = queryset.filter(step__lte=step_max)
    if task:
        queryset = queryset.filter(task_version__task__task_id__icontains=task)
    if reward_min is not None:
        queryset = queryset.filter(reward__gte=reward_min)
    if reward_max is not None:
        queryset = queryset.filter(reward__lte=reward_max)
    if status:
        queryset = queryset.filter(status=status)
    if flag == "any":
        queryset = queryset.exclude(flags=[])
    elif flag == "none":
        queryset = queryset.filter(flags=[])
    elif flag:
        queryset = _has_flag(queryset, flag)
    turns = (
        Turn.objects.filter(trajectory=OuterRef("pk"))
        .order_by()
        .values("trajectory")
        .annotate(n=Count("id"))
    )
    monitors = (
        MonitorScore.objects.filter(trajectory=OuterRef("pk"))
        .order_by()
        .values("trajectory")
        .annotate(top=Max("score"))
    )
    queryset = queryset.annotate(
        turn_count=Coalesce(Subquery(turns.values("n")), 0),
        monitor_max=Subquery(monitors.values("top")),
    )
    return queryset.order_by(*TRAJECTORY_SORTS.get(sort, TRAJECTORY_SORTS["step"]))


def tool_summaries(tools: list) -> list[dict]:
    """Tool schemas (OpenAI-style ``{"type": "function", "function": {...}}``, or the function
    object itself) as the replay lists them: ``[{"name", "description", "parameters": [{"name",
    "type", "required", "description"}]}]``; whatever a schema lacks is left empty."""
    out = []
    for tool in tools or []:
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        schema = function.get("parameters") or {}
        required = set(schema.get("required") or [])
        properties = schema.get("properties") or {}
        out.append(
            {
                "name": str(function.get("name", "")),
                "description": str(function.get("description", "")),
                "parameters": [
                    {
                        "name": str(name),
                        "type": _schema_type(spec),
                        "required": name in required,
                        "description": str((spec or {}).get("description", "")),
                    }
                    for name, spec in properties.items()
                ],
            }
        )
    return out


def _schema_type(spec) -> str:
    if not isinstance(spec, dict):
        return ""
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    kind = spec.get("type", "")
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array of {spec['items'].get('type', 'values')}"
    return " | ".join(kind) if isinstance(kind, list) else str(kind)


def trajectory_episode(*, trajectory: Trajectory) -> dict:
    """What the replay shows around a trajectory's turns: the whole episode's start and end.

    Returns:
        ``{"opening": {"system", "user", "tools"} or None, "prompt": the task version's prompt
        (a completion rollout's opening) or "", "grading": {"recorded", "status", "passed",
        "total", "cut", "rows": [{"list", "id", "passed", "error", "output"}]}}``: ``tools`` as
        :func:`tool_summaries`; ``rows`` FAIL_TO_PASS then PASS_TO_PASS ids for a repository
        task (a test the grading did not report is ``passed`` None), the graded tests in order
        otherwise; ``list`` "" where the suite names none; ``output`` what a terminal task's
        verifier printed (its probe's answer, pytest's report, the spreadsheets' cell diff).
    """
    opening = trajectory.opening
    version = trajectory.task_version
    suite = version.test_suite
    grading = trajectory.grading or {}
    results = {t["id"]: t for t in grading.get("tests", [])}
    rows, listed = [], set()
    for name, ids in (("FAIL_TO_PASS", suite.fail_to_pass), ("PASS_TO_PASS", suite.pass_to_pass)):
        for test_id in ids or []:
            found = results.get(test_id)
            listed.add(test_id)
            rows.append(
                {
                    "list": name,
                    "id": test_id,
                    "passed": None if found is None else bool(found["passed"]),
                    "error": "" if found is None else found.get("error", ""),
                }
            )
    rows += [
        {
            "list": "",
            "id": t["id"],
            "passed": bool(t["passed"]),
            "error": t.get("error", ""),
            "output": t.get("output", ""),
        }
        for t in grading.get("tests", [])
        if t["id"] not in listed
    ]
    return {
        "opening": (
            {
                "system": opening.system,
                "user": opening.user,
                "tools": tool_summaries(opening.tools),
            }
            if opening is not None
            else None
        ),
        "prompt": "" if opening is not None else version.prompt,
        "grading": {
            "recorded": bool(grading),
            "status": grading.get("status", trajectory.status),
            "passed": sum(1 for row in rows if row["passed"]),
            "total": len(rows),
            "cut": grading.get("cut", 0),
            "rows": rows,
        },
    }


def trajectory_get(*, run_id: int, trajectory_id: int) -> Trajectory:
    """One trajectory of one run, with its task version and task loaded.

    Raises:
        Trajectory.DoesNotExist: no trajectory ``trajectory_id`` in run ``run_id``.
    """
    return (
        Trajectory.objects.select_related(
            "run__task_set", "task_version__task", "task_version__test_suite", "opening"
        )
        .defer(  # the prompt stays: the replay shows it as a completion rollout's opening
            "task_version__reference_solution",
            "task_version__files",
            "task_version__report",
            "task_version__verdict_reasons",
        )
        .get(pk=trajectory_id, run_id=run_id)
    )


def trajectory_monitor_scores(*, trajectory_id: int) -> QuerySet[MonitorScore]:
    """The monitors' scores of a trajectory, most suspicious first."""
    return MonitorScore.objects.filter(trajectory_id=trajectory_id).order_by("-score", "monitor")


REVIEW_MONITOR = "review"
"""The monitor table's row of the human review (a ``reviewed_hack`` label): not a stored score."""


def trajectory_monitor_rows(*, trajectory: Trajectory) -> list[dict]:
    """The monitor table of a trajectory's pages: ``{"monitor", "score", "reason", "note"}``
    per stored monitor score, most suspicious first. When reviewers labelled the trajectory a
    reward hack (the ``reviewed_hack`` flag), their verdict comes first as the row
    :data:`REVIEW_MONITOR` (score 1.0, who and why), and every monitor that scored it below 0.5
    carries a ``note`` saying why the two differ, so that "0.000 no hack flags" never stands
    beside a reviewer's "reward hack" unexplained."""
    rows = [
        {"monitor": s.monitor, "score": s.score, "reason": s.reason, "note": ""}
        for s in trajectory_monitor_scores(trajectory_id=trajectory.pk)
    ]
    evidence = trajectory.flag_evidence.get(flags.REVIEWED_HACK)
    if flags.REVIEWED_HACK not in trajectory.flags or not isinstance(evidence, dict):
        return rows
    reviews = [r for r in evidence.get("reviews") or [evidence] if isinstance(r, dict)]
    said = "; ".join(f"{r.get('reviewer', '?')}: {r.get('note', '')}".rstrip(": ") for r in reviews)
    for row in rows:
        if row["score"] >= 0.5:
            continue
        if row["monitor"] == "rules":
            row["note"] = (
                "The rule monitor scores the automatic detectors only, and none of them flagged "
                "this trajectory; a reviewer labelled it a reward hack (reviewed_hack): a miss of "
                "the detectors, kept in the hack corpus."
            )
        else:
            row["note"] = (
                "This monitor judged the trajectory without the review; a reviewer labelled it "
                "a reward hack (reviewed_hack)."
            )
    review = {
        "monitor": REVIEW_MONITOR,
        "score": 1.0,
        "reason": f"labelled reward hack by {said}",
        "note": "",
    }
    return [review, *rows]


def trajectory_group(*, run_id: int, step: int, group: int) -> QuerySet[Trajectory]:
    """The trajectories of one group (same run, step and group), by index: id, index, reward,
    status."""
    return (
        Trajectory.objects.filter(run_id=run_id, step=step, group=group)
        .order_by("index_in_group", "id")
        .only("id", "run_id", "step", "group", "index_in_group", "reward", "status")
    )


def trajectory_turn_index(*, trajectory_id: int) -> list[tuple[int, str, str]]:
    """``(index, action, sandbox_status)`` of each turn in order: the table of contents of a
    replay."""
    return list(
        Turn.objects.filter(trajectory_id=trajectory_id)
        .order_by("index")
        .values_list("index", "action", "sandbox_status")
    )


def trajectory_turns(*, trajectory_id: int) -> QuerySet[Turn]:
    """A trajectory's turns in order, token arrays left in the database (their lengths
    annotated as ``sampled_tokens`` and ``observation_tokens``)."""
    return (
        Turn.objects.filter(trajectory_id=trajectory_id)
        .order_by("index")
        .defer("token_ids", "logprobs", "observation_token_ids")
        .annotate(
            sampled_tokens=PackedLength("token_ids"),
            observation_tokens=PackedLength("observation_token_ids"),
        )
    )


def turn_code_before(*, trajectory_id: int, offset: int) -> str:
    """The code of the turn just before position ``offset`` of a trajectory ("" at 0)."""
    if offset <= 0:
        return ""
    codes = (
        Turn.objects.filter(trajectory_id=trajectory_id)
        .order_by("index")
        .values_list("code", flat=True)
    )
    return next(iter(codes[offset - 1 : offset]), "")


def code_diff(*, old: str, new: str, context: int = 3) -> list[tuple[str, str]]:
    """The unified diff from ``old`` to ``new``, each line with its kind: ``head``,
    ``hunk``, ``add``, ``del`` or ``ctx``; empty when nothing changed."""
    lines = []
    for line in difflib.unified_diff(
        old.splitlines(), new.splitlines(), "previous turn", "this turn", n=context, lineterm=""
    ):
        if line.startswith(("+++", "---")) and not lines[2:]:
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


# --- drift and onset alerts (training.drift raises them) -------------------------------------


def run_alerts(*, run_id: int) -> QuerySet:
    """A run's drift and onset alerts (``training.models.Alert``), oldest first, with who
    acknowledged them."""
    return Alert.objects.filter(run_id=run_id).select_related("acknowledged_by").order_by("id")


def alert_event(alert) -> dict:
    """The wire form of an alert (new, merged into by a repeat, or acknowledged): the client
    keeps one entry per ``id`` and replaces it with each newer event of that id."""
    by = alert.acknowledged_by
    return {
        "kind": "alert",
        "id": alert.pk,
        "run_id": alert.run_id,
        "step": alert.step,
        "last_step": alert.last_step,
        "stream": alert.stream,
        "detector": alert.detector,
        "statistic": alert.statistic,
        "threshold": alert.threshold,
        "window": alert.window,
        "severity": alert.severity,
        "message": alert.message,
        "repeats": alert.repeats,
        "created_at": alert.created_at.isoformat() if alert.created_at else None,
        "acknowledged": alert.acknowledged_at is not None,
        "acknowledged_at": alert.acknowledged_at.isoformat() if alert.acknowledged_at else None,
        "acknowledged_by": by.get_username() if by is not None else None,
        "acknowledgement_note": alert.acknowledgement_note,
    }


# --- the live dashboard: per-component histograms, a bounded back-fill, run comparison ---------

# Step metrics that are not reward components although they are named ``reward/...``.
NOT_COMPONENTS = frozenset({"mean", "pass_rate", "perfect_share"})

# Scalars averaged over each bucket of older steps in a decimated back-fill (what the run page
# draws).
SUMMARY_METRICS = (
    "reward/pass_rate",
    "flags/rate",
    "tokens/generated",
    "timing/generation_s",
    "timing/sandbox_s",
    "timing/grading_s",
    "timing/update_s",
    "loss/policy",
    "loss/kl",
    "policy/entropy",
    "policy/clip_fraction",
)

BACKFILL_FULL_STEPS = 300
"""A back-fill sends at most this many of the newest steps in full (with component histograms)."""

BACKFILL_MAX_BUCKETS = 300
"""Older steps of a back-fill are summed into at most this many buckets of consecutive steps."""

BACKFILL_COMPONENT_STEPS = 60
"""The newest steps of a back-fill that carry their per-component histograms (older ones: the
components API, when the page shows them)."""

BACKFILL_TIMELINE_STEPS = 60
"""The newest steps of a back-fill that carry their ``timeline`` (phases and sandbox pool samples,
up to ``training.phase.MAX_SAMPLES_PER_STEP`` each): the pool chart shows that recent stretch."""

COMPONENT_SPAN_MAX = 2000
"""The most steps one component-histogram read covers (a bounded query)."""


from django.db.models import FloatField as _FloatField  # noqa: E402 (the dashboard's reads below)


class JsonNumber(Func):
    """A number held in a JSON column, as a float: ``key`` names an object's member (text) or an
    array's element (int); NULL when absent. One plain JSON read per row (SQLite ``JSON_EXTRACT``,
    PostgreSQL ``->>``), where Django's key transforms read the JSON twice on SQLite."""

    output_field = _FloatField()

    def __init__(self, field: str, key: str | int) -> None:
        self.key = key
        super().__init__(field)

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        path = f"$[{int(self.key)}]" if isinstance(self.key, int) else f"$.{json.dumps(self.key)}"
        return f"JSON_EXTRACT({sql}, %s)", [*params, path]

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"(({sql}) ->> %s)::double precision", [*params, self.key]

    def as_sql(self, compiler, connection, **extra_context):
        field = self.source_expressions[0]
        return compiler.compile(Cast(KeyTextTransform(str(self.key), field), FloatField()))


class RewardBin(Func):
    """The bin (0..9) of a value over ten equal bins on [0, 1], as
    :func:`training.services.reward_histogram` bins it (``int(value * 10)``, clamped);
    NULL for NULL."""

    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"MAX(MIN(CAST(({sql}) * 10 AS INTEGER), 9), 0)", params  # scalar MIN/MAX keep NULL

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (
            (
                f"CASE WHEN ({sql}) IS NULL THEN NULL ELSE GREATEST(LEAST(CAST(FLOOR(({sql}) * "
                "10) AS INTEGER), 9), 0) END"
            ),
            [*params, *params],
        )


def run_component_names(
    *, run_id: int, metrics: dict | None = None, config: dict | None = None
) -> list[str]:
    """The reward components of a run's trajectories: the ``reward/<name>`` means the trainer
    records per step (``metrics``, else the run's newest step), and the run's ``reward_weights``;
    ``correctness`` when neither names one (``step_record`` stores it for rollouts without
    components)."""
    if config is None:
        config = (
            TrainingRun.objects.values_list("config", flat=True).filter(pk=run_id).first() or {}
        )
    if metrics is None:
        metrics = (
            StepMetric.objects.filter(run_id=run_id)
            .order_by("-step")
            .values_list("metrics", flat=True)
            .first()
            or {}
        )
    names = {
        key[len("reward/") :]
        for key in metrics
        if key.startswith("reward/") and key[len("reward/") :] not in NOT_COMPONENTS
    }
    names |= set((config or {}).get("reward_weights") or {})
    return sorted(names) or ["correctness"]


def step_component_histograms(
    *, run_id: int, first: int, last: int, names: list[str]
) -> dict[int, dict[str, list[int]]]:
    """Counts of each reward component over :data:`training.models.REWARD_BINS` (ten bins on
    [0, 1], as ``StepMetric.reward_histogram``) for every step in ``first..last``, read from
    ``Trajectory.reward_components`` in ONE aggregate query: each trajectory's bins are computed
    once (a materialized CTE over the ``(run, step)`` index range), then counted per step, so the
    answer is one row per step; dropped ``infra_error`` trajectories are left out, as from the
    total histogram.

    Returns:
        ``{step: {component: [10 counts]}}``; a step without trajectories is absent.

    Raises:
        ValueError: the span is longer than :data:`COMPONENT_SPAN_MAX` steps.
    """
    if last < first:
        return {}
    if last - first + 1 > COMPONENT_SPAN_MAX:
        raise ValueError(
            f"at most {COMPONENT_SPAN_MAX} steps at once, asked for {last - first + 1}"
        )
    names = list(names)[:16]
    bins = {
        f"b{i}": RewardBin(JsonNumber("reward_components", name)) for i, name in enumerate(names)
    }
    inner = (
        Trajectory.objects.filter(run_id=run_id, step__gte=first, step__lte=last)
        .annotate(_flags_text=Cast("flags", TextField()))
        .exclude(_flags_text__contains=f'"{flags.INFRA_ERROR}"')
        .annotate(**bins)
        .order_by()
        .values("step", *bins)
    )
    inner_sql, params = inner.query.sql_with_params()
    quote = connection.ops.quote_name
    counts = ", ".join(
        f"SUM(CASE WHEN {quote(f'b{i}')} = {k} THEN 1 ELSE 0 END)"
        for i in range(len(names))
        for k in range(10)
    )
    materialized = (
        "MATERIALIZED "
        if connection.vendor == "postgresql"
        or (connection.vendor == "sqlite" and connection.Database.sqlite_version_info >= (3, 35))
        else ""
    )
    sql = (
        f"WITH bins AS {materialized}({inner_sql}) "
        f"SELECT {quote('step')}, {counts} FROM bins GROUP BY {quote('step')}"
    )
    out: dict[int, dict[str, list[int]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for row in cursor.fetchall():
            out[row[0]] = {
                name: [int(c or 0) for c in row[1 + 10 * i : 11 + 10 * i]]
                for i, name in enumerate(names)
            }
    return out


def step_event_components(
    *, run_id: int, step: int, metrics: dict | None = None
) -> dict[str, list[int]]:
    """The per-component histograms of one step (two queries: the run's config, then the counts;
    the live path adds them to a broadcast :func:`step_event`)."""
    names = run_component_names(run_id=run_id, metrics=metrics or {}, config=None)
    return step_component_histograms(run_id=run_id, first=step, last=step, names=names).get(
        step, {}
    )


def step_buckets(*, run_id: int, first: int, last: int, every: int, **aggregates) -> QuerySet:
    """A run's steps ``first..last`` grouped into buckets of ``every`` consecutive steps, in
    order: one row per bucket with its ``first_step``, ``last_step`` and ``aggregates`` (one
    aggregate query)."""
    return (
        StepMetric.objects.filter(run_id=run_id, step__gte=first, step__lte=last)
        .annotate(bucket=(F("step") - Value(first)) / Value(every))
        .order_by()
        .values("bucket")
        .annotate(first_step=Min("step"), last_step=Max("step"), **aggregates)
        .order_by("bucket")
    )


def run_steps_binned(*, run_id: int, first: int, last: int, buckets: int) -> list[dict]:
    """Steps ``first..last`` of a run summed into at most ``buckets`` buckets of consecutive steps,
    in ONE aggregate query: each a step event (``kind`` ``step``, keyed by its last step) with
    ``first_step``, ``span`` (steps in it), the summed histogram, the mean ``reward_mean`` and the
    mean of each of :data:`SUMMARY_METRICS`; ``decimated`` is True."""
    if last < first or buckets < 1:
        return []
    every = max(1, -(-(last - first + 1) // buckets))
    aggregates = {
        f"h{i}": Sum(JsonNumber("reward_histogram", i)) for i in range(len(REWARD_BINS) - 1)
    }
    aggregates |= {
        f"m{i}": Avg(JsonNumber("metrics", key)) for i, key in enumerate(SUMMARY_METRICS)
    }
    rows = step_buckets(
        run_id=run_id,
        first=first,
        last=last,
        every=every,
        n=Count("id"),
        mean=Avg("reward_mean"),
        **aggregates,
    )
    events = []
    for row in rows:
        metrics = {
            key: row[f"m{i}"] for i, key in enumerate(SUMMARY_METRICS) if row[f"m{i}"] is not None
        }
        metrics["reward/mean"] = row["mean"]
        events.append(
            {
                "kind": "step",
                "seq": row["last_step"],
                "step": row["last_step"],
                "first_step": row["first_step"],
                "span": row["n"],
                "decimated": True,
                "reward_mean": row["mean"],
                "histogram": [int(row[f"h{i}"] or 0) for i in range(len(REWARD_BINS) - 1)],
                "bins": REWARD_BINS,
                "metrics": metrics,
            }
        )
    return events


def run_backfill_bounded(
    *,
    run_id: int,
    after: int,
    full_steps: int = BACKFILL_FULL_STEPS,
    max_buckets: int = BACKFILL_MAX_BUCKETS,
    component_steps: int = BACKFILL_COMPONENT_STEPS,
    timeline_steps: int = BACKFILL_TIMELINE_STEPS,
) -> list[dict]:
    """What a client that has seen up to ``after`` missed, bounded however long the run is.

    The run's status; then the steps after ``after``: the newest ``full_steps`` in full, each
    with ``components`` (per-component histograms), and the older ones summed into at most
    ``max_buckets`` buckets (:func:`run_steps_binned`: a 10,000-step run sends about 600 events,
    not 10,000); only the newest ``component_steps`` carry ``components`` (the others read them
    through ``/api/runs/<id>/components/`` when shown), and only the newest ``timeline_steps`` their
    ``timeline`` (the pool chart's phases and samples); then held-out evaluations and alerts as
    :func:`run_backfill`; last a
    ``{"kind": "backfill", "steps", "decimated"}`` marker. A fixed number of queries whatever the
    run's length.
    """
    run = TrainingRun.objects.get(pk=run_id)
    events: list[dict] = [{"kind": "status", "status": run.status, "reason": run.status_reason}]
    progress = (run.summary or {}).get("progress")
    if (
        progress
        and run.status == TrainingRun.RUNNING
        and not StepMetric.objects.filter(run_id=run_id).exists()
    ):
        events.append({"kind": "progress", **progress})  # before the first step only
    full = list(
        StepMetric.objects.filter(run_id=run_id, step__gt=after)
        .defer("timeline")
        .order_by("-step")[:full_steps]
    )
    full.reverse()
    timelines = (
        dict(
            StepMetric.objects.filter(run_id=run_id, step__gt=after)
            .order_by("-step")
            .values_list("step", "timeline")[:timeline_steps]
        )
        if timeline_steps > 0
        else {}
    )
    decimated = []
    if len(full) == full_steps:
        older = StepMetric.objects.filter(
            run_id=run_id, step__gt=after, step__lt=full[0].step
        ).aggregate(first=Min("step"), last=Max("step"))
        if older["first"] is not None:
            decimated = run_steps_binned(
                run_id=run_id, first=older["first"], last=older["last"], buckets=max_buckets
            )
    events += decimated
    if full:
        names = run_component_names(run_id=run_id, metrics=full[-1].metrics, config=run.config)
        with_components = full[-component_steps:] if component_steps > 0 else []
        components = (
            step_component_histograms(
                run_id=run_id,
                first=with_components[0].step,
                last=with_components[-1].step,
                names=names,
            )
            if with_components
            else {}
        )
        for step in full:
            event = step_event(step, timeline=False)
            if timelines.get(step.step):
                event["timeline"] = timelines[step.step]
            if with_components and step.step >= with_components[0].step:
                event["components"] = components.get(step.step, {})
            events.append(event)
    events += [evaluation_event(e) for e in run.evaluations.all()]
    events += [alert_event(alert) for alert in run_alerts(run_id=run_id)]
    events += [warning_event(w) for w in run_warnings_of(run_ids=[run_id]).get(run_id, [])]
    covered = sum(e["span"] for e in decimated) + len(full)
    events.append({"kind": "backfill", "steps": covered, "decimated": bool(decimated)})
    return events


METRIC_SERIES_MAX = 12
"""The most metrics one series request may ask for."""


def run_metric_series(*, run_id: int, names: list[str], max_points: int = 1000) -> dict:
    """Any recorded metrics of a run, step by step, for the metric picker of the run and compare
    pages: ``{"run", "binned", "step", "first_step", "series": {name: [value or None]}}``.

    Past ``max_points`` steps, consecutive steps are averaged into at most ``max_points``
    buckets in the database (each keyed by its last ``step``, ``first_step`` its first); two
    queries whatever the run's length. A metric a step did not record is None there.
    """
    span = StepMetric.objects.filter(run_id=run_id).aggregate(first=Min("step"), last=Max("step"))
    names = list(dict.fromkeys(names))
    out = {"run": run_id, "binned": False, "step": [], "first_step": [], "series": {}}
    if span["first"] is None:
        out["series"] = {name: [] for name in names}
        return out
    first, last = span["first"], span["last"]
    if last - first + 1 <= max_points:
        rows = (
            StepMetric.objects.filter(run_id=run_id).order_by("step").values_list("step", "metrics")
        )
        for step, metrics in rows:
            out["step"].append(step)
            out["first_step"].append(step)
            for name in names:
                value = (metrics or {}).get(name)
                number = isinstance(value, (int, float)) and not isinstance(value, bool)
                out["series"].setdefault(name, []).append(value if number else None)
        out["series"] = {name: out["series"].get(name, []) for name in names}
        return out
    rows = step_buckets(
        run_id=run_id,
        first=first,
        last=last,
        every=-(-(last - first + 1) // max_points),
        **{f"m{i}": Avg(JsonNumber("metrics", name)) for i, name in enumerate(names)},
    )
    out["binned"] = True
    for row in rows:
        out["step"].append(row["last_step"])
        out["first_step"].append(row["first_step"])
        for i, name in enumerate(names):
            out["series"].setdefault(name, []).append(row[f"m{i}"])
    out["series"] = {name: out["series"].get(name, []) for name in names}
    return out


def run_curves(*, run_id: int, max_points: int = 1000) -> dict:
    """A run's per-step curves for the comparison page: ``step``, ``reward_mean`` and the
    :data:`SUMMARY_METRICS` (bucket means past ``max_points`` steps), held-out pass@1 and reward.
    Three queries whatever the run's length."""
    span = StepMetric.objects.filter(run_id=run_id).aggregate(first=Min("step"), last=Max("step"))
    if span["first"] is None:
        points = []
    elif span["last"] - span["first"] + 1 <= max_points:
        points = [
            {"step": s.step, "reward_mean": s.reward_mean, "metrics": s.metrics}
            for s in StepMetric.objects.filter(run_id=run_id)
            .order_by("step")
            .only("step", "reward_mean", "metrics")
        ]
    else:
        points = [
            {"step": e["step"], "reward_mean": e["reward_mean"], "metrics": e["metrics"]}
            for e in run_steps_binned(
                run_id=run_id, first=span["first"], last=span["last"], buckets=max_points
            )
        ]
    metric = lambda key: [p["metrics"].get(key) for p in points]  # noqa: E731

    evaluations = list(
        HeldOutEvaluation.objects.filter(run_id=run_id)
        .order_by("step")
        .values_list("step", "pass_at_k", "reward_mean")
    )
    return {
        "step": [p["step"] for p in points],
        "reward_mean": [p["reward_mean"] for p in points],
        "correctness": metric("reward/correctness"),
        "pass_rate": metric("reward/pass_rate"),
        "flag_rate": metric("flags/rate"),
        "entropy": metric("policy/entropy"),
        "kl": metric("loss/kl"),
        "heldout_step": [step for step, _p, _r in evaluations],
        "heldout_pass1": [(pass_at_k or {}).get("1") for _s, pass_at_k, _r in evaluations],
        "heldout_reward": [reward for _s, _p, reward in evaluations],
    }


# --- the runs table: every run with its metrics as columns, sorted and filtered by any ---------

HELDOUT_PASS1 = "heldout/pass@1"
"""A metric of the runs table read from the held-out evaluations (pass@1), not from the steps."""

RUN_TABLE_METRICS = ("reward/mean", "reward/pass_rate", HELDOUT_PASS1)
"""The metric columns the runs table shows unless the user picks others."""

LOWER_IS_BETTER = ("loss/", "flags/", "timing/", "sandbox/", "policy/clip_fraction")
"""Metric name prefixes whose best value is the lowest (every other metric's is the highest)."""

RUN_TABLE_COLUMNS = (
    "id",
    "name",
    "status",
    "launched_by",
    "task_set",
    "created",
    "duration",
    "steps",
)
"""The fixed columns a runs table sorts by; metric columns are ``<metric>:latest`` and
``<metric>:best``."""


def lower_is_better(metric: str) -> bool:
    return metric.startswith(LOWER_IS_BETTER)


def _metric_columns(metrics: list[str]) -> dict[str, object]:
    """``{"m<i>_latest": expression, "m<i>_best": expression}`` for each metric: the value at the
    run's newest step (or evaluation) and its best (max, or min for :func:`lower_is_better`)."""
    columns = {}
    for i, metric in enumerate(metrics):
        if metric == HELDOUT_PASS1:
            rows = HeldOutEvaluation.objects.filter(run=OuterRef("pk")).annotate(
                v=JsonNumber("pass_at_k", "1")
            )
        else:
            rows = StepMetric.objects.filter(run=OuterRef("pk")).annotate(
                v=JsonNumber("metrics", metric)
            )
        best = Min("v") if lower_is_better(metric) else Max("v")
        columns[f"m{i}_latest"] = Subquery(
            rows.exclude(v=None).order_by("-step").values("v")[:1], output_field=FloatField()
        )
        columns[f"m{i}_best"] = Subquery(
            rows.order_by().values("run").annotate(b=best).values("b")[:1],
            output_field=FloatField(),
        )
    return columns


def run_table(
    *,
    metrics: list[str] | tuple = RUN_TABLE_METRICS,
    sort: str = "-id",
    text: str = "",
    statuses: list[str] | None = None,
    tags: list[str] | None = None,
    launched_by: str = "",
    task_set: str = "",
    ranges: dict[str, list[tuple[str, float]]] | None = None,
) -> QuerySet[TrainingRun]:
    """Runs as the runs table lists them, each annotated with ``steps_done`` (its newest step),
    ``duration`` (started to finished, or to now while it runs; None before it starts) and, per
    metric ``i`` of ``metrics``, ``m<i>_latest`` and ``m<i>_best``; filtered and sorted in the
    database (a fixed number of queries however many runs).

    Args:
        sort: a column of :data:`RUN_TABLE_COLUMNS` or ``<metric>:latest`` / ``<metric>:best``
            (a metric of ``metrics``), ``-`` first for descending; runs without a value come last.
        text: words that must each appear in the run's id, name, description, tags, task set or
            launcher (case-insensitive).
        statuses, tags: the run's status is one of ``statuses``; it carries every tag of ``tags``.
        launched_by, task_set: substrings of the launcher and the task set's name.
        ranges: ``{column: [(op, value)]}`` with op in ``<``, ``<=``, ``>``, ``>=``, ``=``, on the
            numeric columns (``steps``, ``duration`` in seconds, metric columns).

    Raises:
        InputError: an unknown sort or range column (``field`` ``sort`` or ``filter``).
    """
    metrics = list(metrics)
    now = Now()
    queryset = (
        TrainingRun.objects.select_related("task_set")
        .defer("summary")
        .annotate(
            steps_done=Coalesce(
                Subquery(
                    StepMetric.objects.filter(run=OuterRef("pk"))
                    .order_by()
                    .values("run")
                    .annotate(last=Max("step"))
                    .values("last")[:1],
                    output_field=IntegerField(),
                ),
                0,
            ),
            duration=ExpressionWrapper(
                Coalesce("finished_at", now) - F("started_at"), output_field=DurationField()
            ),
            **_metric_columns(metrics),
        )
    )
    columns = {
        "id": "id",
        "name": "name",
        "status": "status",
        "launched_by": "launched_by",
        "task_set": "task_set__name",
        "created": "created_at",
        "duration": "duration",
        "steps": "steps_done",
    }
    for i, metric in enumerate(metrics):
        columns[f"{metric}:latest"] = f"m{i}_latest"
        columns[f"{metric}:best"] = f"m{i}_best"
    for word in text.split():
        match = (
            Q(name__icontains=word)
            | Q(description__icontains=word)
            | Q(task_set__name__icontains=word)
            | Q(launched_by__icontains=word)
            | Q(tags__icontains=word)
        )
        if word.isdigit():
            match |= Q(pk=int(word))
        queryset = queryset.filter(match)
    if statuses:
        queryset = queryset.filter(status__in=statuses)
    for tag in tags or []:
        queryset = queryset.filter(tags__icontains=json.dumps(tag))
    if launched_by:
        queryset = queryset.filter(launched_by__icontains=launched_by)
    if task_set:
        queryset = queryset.filter(task_set__name__icontains=task_set)
    lookups = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte", "=": "exact"}
    for column, conditions in (ranges or {}).items():
        if column not in columns or column in ("name", "status", "launched_by", "task_set"):
            raise InputError(
                f"filter: {column!r} is not a numeric column of this table", field="filter"
            )
        for op, value in conditions:
            if column == "duration":
                value = timedelta(seconds=value)
            queryset = queryset.filter(**{f"{columns[column]}__{lookups[op]}": value})
    key = sort.lstrip("-")
    if key not in columns:
        raise InputError(
            f"sort: unknown column {key!r}; sort by {', '.join(columns)}", field="sort"
        )
    field = F(columns[key])
    ordered = field.desc(nulls_last=True) if sort.startswith("-") else field.asc(nulls_last=True)
    return queryset.order_by(ordered, "-id")


def run_metric_names(*, run_ids: list[int]) -> list[str]:
    """The metrics the newest step of any of these runs recorded (the columns a user may pick),
    with :data:`HELDOUT_PASS1`, sorted."""
    newest = (
        StepMetric.objects.filter(run_id__in=run_ids)
        .order_by()
        .values("run")
        .annotate(last=Max("step"))
        .values_list("run", "last")
    )
    names = {HELDOUT_PASS1}
    pairs = list(newest)
    if pairs:
        condition = Q()
        for run_id, last in pairs:
            condition |= Q(run_id=run_id, step=last)
        for metrics in StepMetric.objects.filter(condition).values_list("metrics", flat=True):
            names.update(k for k, v in (metrics or {}).items() if isinstance(v, (int, float)))
    return sorted(names)


def _flatten(value, prefix: str = "") -> dict:
    """A nested config as ``{"dotted.key": leaf}`` (lists and scalars are leaves)."""
    if isinstance(value, dict) and value:
        out = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def runs_config_table(runs: list[TrainingRun]) -> list[dict]:
    """The runs' settings side by side, one row per key: ``{"key", "values": [one per run],
    "differs"}``; the task set, steps and backend first, then every config key flattened
    (``reward_weights.quality``); a key a run's config lacks shows as None."""
    flat = [
        {
            "task set": run.task_set.name,
            "steps": run.total_steps,
            "backend": run.backend,
            **_flatten(run.config or {}),
        }
        for run in runs
    ]
    keys = list(dict.fromkeys(key for config in flat for key in config))
    head, rest = keys[:3], sorted(keys[3:])
    rows = []
    for key in head + rest:
        values = [config.get(key) for config in flat]
        shown = [
            json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in values
        ]
        rows.append({"key": key, "values": shown, "differs": len({repr(v) for v in values}) > 1})
    return rows


def reward_formula(config: dict) -> str:
    """What a run's reward is, in words: ``correctness`` alone, or ``(correctness×1 +
    quality×0.2) / 1.2``."""
    weights = {
        k: w for k, w in ((config or {}).get("reward_weights") or {"correctness": 1.0}).items() if w
    }
    if list(weights) == ["correctness"]:
        return "correctness"
    total = sum(weights.values())
    ordered = sorted(weights.items(), key=lambda item: (item[0] != "correctness", item[0]))
    terms = " + ".join(f"{name}×{weight:g}" for name, weight in ordered)
    return f"({terms}) / {total:g}"
