"""The runs table's query, read from a query string: the same for the page (``/``) and the API
(``GET /api/runs/``).

Parameters (all optional):

==================  ============================================================================
``q``               words that must each appear in a run's id, name, description, tags, task set or
                    launcher
``status``          repeated: the run's status is one of them
``tag``             repeated: the run carries every one
``launched_by``     a substring of who launched it; ``task_set`` a substring of its task set
``metric``          repeated: the metric columns (default ``reward/mean``, ``reward/pass_rate``,
                    ``heldout/pass@1``), each shown as its latest and its best value
``sort``            a column, ``-`` first for descending: ``id``, ``name``, ``status``,
                    ``launched_by``, ``task_set``, ``created``, ``duration``, ``steps``, or
                    ``<metric>:latest`` / ``<metric>:best`` (default ``-id``)
``f.<column>``      a range on a numeric column: ``>0.5``, ``<=10``, ``0.2..0.8``, ``=3`` or a
                    number; ``duration`` takes seconds or ``90s``, ``15m``, ``2h``
==================  ============================================================================

Bad input is refused with the parameter named (:class:`~core.errors.InputError`), never
guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.errors import InputError
from training.models import TrainingRun
from training.selectors import (
    RUN_TABLE_METRICS,
    lower_is_better,
    run_table,
    run_warnings_of,
    warning_event,
)

MAX_METRICS = 8
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
RANGE = re.compile(rf"^\s*(?P<low>{NUMBER}[smhd]?)\s*\.\.\s*(?P<high>{NUMBER}[smhd]?)\s*$")
COMPARISON = re.compile(rf"^\s*(?P<op><=|>=|<|>|=)?\s*(?P<value>{NUMBER}[smhd]?)\s*$")


def _number(text: str, *, column: str) -> float:
    unit = text[-1] if text and text[-1] in "smhd" else ""
    if unit and column != "duration":
        raise ValueError(f"{text!r}: a unit only goes with duration")
    return float(text[: len(text) - len(unit)]) * UNITS[unit]


def parse_range(expression: str, *, column: str) -> list[tuple[str, float]]:
    """``">0.5"`` as ``[(">", 0.5)]``, ``"0.2..0.8"`` as ``[(">=", 0.2), ("<=", 0.8)]``, ``"15m"``
    (duration) as ``[("=", 900.0)]``.

    Raises:
        InputError: (``f.<column>``) an expression of none of these forms.
    """
    try:
        if match := RANGE.match(expression):
            return [
                (">=", _number(match["low"], column=column)),
                ("<=", _number(match["high"], column=column)),
            ]
        if match := COMPARISON.match(expression):
            return [(match["op"] or "=", _number(match["value"], column=column))]
        raise ValueError(f"{expression!r}")
    except ValueError as exc:
        raise InputError(
            f"f.{column}: {exc} is not a range; write >0.5, <=10, 0.2..0.8 or a number"
            + (" (seconds, or 90s, 15m, 2h)" if column == "duration" else ""),
            field=f"f.{column}",
        ) from None


@dataclass
class RunTableQuery:
    """A runs table's filters, sort and metric columns, checked."""

    metrics: list[str] = field(default_factory=lambda: list(RUN_TABLE_METRICS))
    sort: str = "-id"
    text: str = ""
    statuses: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    launched_by: str = ""
    task_set: str = ""
    ranges: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    raw_ranges: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params) -> RunTableQuery:
        """From a ``QueryDict`` (or a dict of lists).

        Raises:
            InputError: naming the parameter at fault.
        """
        get = params.get
        getlist = params.getlist
        metrics = [m.strip() for m in getlist("metric") if m.strip()] or list(RUN_TABLE_METRICS)
        metrics = list(dict.fromkeys(metrics))
        if len(metrics) > MAX_METRICS:
            raise InputError(f"metric: at most {MAX_METRICS} metric columns", field="metric")
        statuses = [s for s in getlist("status") if s]
        known = dict(TrainingRun.STATUSES)
        unknown = [s for s in statuses if s not in known]
        if unknown:
            raise InputError(
                f"status: unknown {unknown[0]!r}; known: {', '.join(known)}", field="status"
            )
        query = cls(
            metrics=metrics,
            sort=(get("sort") or "-id").strip(),
            text=(get("q") or "").strip(),
            statuses=statuses,
            tags=[t for value in getlist("tag") for t in value.replace(",", " ").split()],
            launched_by=(get("launched_by") or "").strip(),
            task_set=(get("task_set") or "").strip(),
        )
        for key in params:
            if key.startswith("f.") and (get(key) or "").strip():
                column = key[2:]
                query.raw_ranges[column] = get(key).strip()
                query.ranges[column] = parse_range(get(key), column=column)
        return query

    def runs(self):
        """The runs (:func:`training.selectors.run_table`).

        Raises:
            InputError: an unknown sort or range column.
        """
        return run_table(
            metrics=self.metrics,
            sort=self.sort,
            text=self.text,
            statuses=self.statuses,
            tags=self.tags,
            launched_by=self.launched_by,
            task_set=self.task_set,
            ranges=self.ranges,
        )

    def metric_columns(self) -> list[dict]:
        """One entry per metric: its name, annotation names and which way is best."""
        return [
            {
                "metric": metric,
                "latest": f"m{i}_latest",
                "best": f"m{i}_best",
                "best_is": "min" if lower_is_better(metric) else "max",
            }
            for i, metric in enumerate(self.metrics)
        ]


def run_rows(runs: list[TrainingRun], columns: list[dict]) -> list[dict]:
    """:func:`run_row` of each run, their warnings read in one query."""
    warnings = run_warnings_of(run_ids=[run.pk for run in runs])
    return [run_row(run, columns, warnings=warnings.get(run.pk, [])) for run in runs]


def run_row(run: TrainingRun, columns: list[dict], *, warnings: list | None = None) -> dict:
    """One run of the table as data (the page's row, the API's item); ``warnings`` the run's
    (``training.models.RunWarning``; read here when not given) as ``{"kind", "title",
    "message"}``."""
    if warnings is None:
        warnings = run_warnings_of(run_ids=[run.pk]).get(run.pk, [])
    duration = run.duration.total_seconds() if run.duration is not None else None
    return {
        "id": run.pk,
        "name": run.name,
        "description": run.description,
        "tags": run.tags,
        "launched_by": run.launched_by,
        "task_set": run.task_set.name,
        "status": run.status,
        "backend": run.backend,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_s": round(duration, 1) if duration is not None else None,
        "steps_done": run.steps_done or 0,
        "total_steps": run.total_steps,
        "metrics": {
            c["metric"]: {"latest": getattr(run, c["latest"]), "best": getattr(run, c["best"])}
            for c in columns
        },
        "warnings": [
            {"kind": w.kind, "title": warning_event(w)["title"], "message": w.message}
            for w in warnings
        ],
    }


def duration_text(seconds: float | None) -> str:
    """``1 h 02 m``, ``3 m 07 s``, ``12 s``; ``–`` without one."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} m"
    if seconds >= 60:
        return f"{seconds // 60} m {seconds % 60:02d} s"
    return f"{seconds} s"


FIXED_HEADERS = [
    ("id", "run"),
    ("status", "status"),
    ("task_set", "task set"),
    ("launched_by", "launched by"),
    ("duration", "duration"),
    ("steps", "steps"),
]


def headers(query: RunTableQuery, params) -> list[dict]:
    """The table's sortable headers: ``{"key", "label", "title", "url", "sorted"}`` where ``url``
    sorts by the column (descending first for numbers and times, ascending for text; again: the
    other way), ``title`` says what a short label means, and ``sorted`` is ``"asc"``, ``"desc"``
    or ``""``."""
    out = []
    keys = [(key, label) for key, label in FIXED_HEADERS]
    titles = {}
    for column in query.metric_columns():
        keys.append((f"{column['metric']}:latest", "latest"))
        # short, so that the table fits its window: the arrow says which way is best
        best = f"{column['metric']}:best"
        keys.append((best, "best ↑" if column["best_is"] == "max" else "best ↓"))
        titles[best] = f"the best {column['metric']} over the run's steps: the " + (
            "highest" if column["best_is"] == "max" else "lowest"
        )
    keys.append(("created", "created"))
    text_columns = ("name", "status", "task_set", "launched_by")
    for key, label in keys:
        current = query.sort.lstrip("-") == key
        descending = query.sort.startswith("-")
        if current:
            next_sort = key if descending else f"-{key}"
        else:
            next_sort = key if key in text_columns else f"-{key}"
        copy = params.copy()
        copy["sort"] = next_sort
        out.append(
            {
                "key": key,
                "label": label,
                "title": titles.get(key, ""),
                "url": "?" + copy.urlencode(),
                "sorted": ("desc" if descending else "asc") if current else "",
            }
        )
    return out
