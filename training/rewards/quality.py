"""The ``quality`` reward component: lint findings and cyclomatic complexity, per logical line,
against the task's reference solution.

What is measured (per program, on the *completion* only):

- **Lint** with ruff (``ruff check``, rules :data:`RUFF_SELECT` minus :data:`RUFF_IGNORE`): every
  finding weighs :func:`finding_weight` (pyflakes ``F``, bugbear ``B`` and pylint errors ``PLE``
  1.0: likely bugs; pylint warnings ``PLW``, ``E7``/``E9`` statements, mccabe and the
  simplification families 0.5; other pycodestyle ``E``/``W`` 0.25).
  ``L`` = summed weights / logical lines.
- **Complexity** with radon (``radon.complexity.cc_visit``): decision points, the cyclomatic
  complexity of each function (closures and methods included) minus 1, summed.
  ``D`` = decision points / logical lines. (Decision points, not the complexity itself: a
  function's base 1 would make a one-line answer look "denser" than a five-line one.)
- **Logical lines**: statements (``ast.stmt``) that start in the completion; at least 1.

The graded program is prompt + completion, and the prompt is the same for the submission and
the reference, so only the completion is judged: when the program starts with the task's
prompt, findings on the prompt's lines, statements there (the signature, the docstring) and
functions that end inside it (helpers the prompt gives) are left out; ruff and radon still see
the whole program, so the prompt's imports and helpers count as defined and used. A program
that rewrote the prompt is judged whole. The reference (prompt + reference solution) is
measured the same way and cached per task version id (and its text's hash).

Score, in [0, 1]::

    quality = 0.6 * exp(-4 * max(0, L_sub - L_ref)) + 0.4 * exp(-2 * max(0, D_sub - D_ref))

so the reference scores 1.0 and so does anything as clean and as simple per line; one more
full-weight finding per 10 lines costs 0.6 * (1 - e^-0.4) ~= 0.20, one more branch per 4 lines
0.4 * (1 - e^-0.5) ~= 0.16. Without a reference the figures are compared with 0 (a clean,
branch-free program). A program that does not parse scores 0.

Speed: :func:`quality_batch` runs ruff once for a whole batch (a temporary directory of files;
ruff lints them in parallel) and caches each program's figures, so the registry's
per-submission :func:`quality` called afterwards on the same code costs a dictionary lookup.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function
from ruff.__main__ import find_ruff_bin

from training.rewards.base import GradedSubmission
from training.rewards.registry import reward

RUFF_SELECT = ("E", "W", "F", "B", "C90", "SIM", "RET", "PIE", "C4", "PERF", "PLE", "PLW", "A")
# Line length is style the prompt's docstrings set; a missing final newline is the transport's.
RUFF_IGNORE = ("E501", "W292")
LINT_SLOPE = 4.0
COMPLEXITY_SLOPE = 2.0
LINT_SHARE = 0.6
CACHE_SIZE = 8192
RUFF_TIMEOUT_S = 120


@dataclass(frozen=True)
class QualityFigures:
    """What :func:`measure` found in one program's completion.

    Attributes:
        parsed: False when the program does not parse (it then scores 0).
        logical_lines: statements starting in the completion (>= 1).
        lint_weight: the summed weights of ruff's findings in the completion.
        decision_points: cyclomatic complexity minus 1, summed over the completion's functions.
        findings: ruff's codes, in the order found (for reports).
    """

    parsed: bool
    logical_lines: int = 1
    lint_weight: float = 0.0
    decision_points: int = 0
    findings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def lint_density(self) -> float:
        """Weighted lint findings per logical line."""
        return self.lint_weight / self.logical_lines

    @property
    def complexity_density(self) -> float:
        """Decision points per logical line."""
        return self.decision_points / self.logical_lines


CLEAN = QualityFigures(parsed=True)


def finding_weight(code: str | None) -> float:
    """The weight of one ruff finding by its rule code (see the module's docstring)."""
    if not code:
        return 1.0
    if code.startswith(("F", "B", "PLE")):
        return 1.0
    if code.startswith(("E7", "E9", "PLW", "C90", "SIM", "RET", "PIE", "C4", "PERF", "A")):
        return 0.5
    return 0.25


def ruff_binary() -> str:
    """The ruff executable of the ``ruff`` package installed beside this interpreter."""
    return os.fsdecode(find_ruff_bin())


def _ruff_command() -> list[str]:
    return [
        ruff_binary(),
        "check",
        "--isolated",
        "--no-cache",
        "--exit-zero",
        "--output-format",
        "json",
        "--target-version",
        "py311",
        "--select",
        ",".join(RUFF_SELECT),
        "--ignore",
        ",".join(RUFF_IGNORE),
    ]


def ruff_findings(programs: list[str]) -> list[list[tuple[str | None, int]]]:
    """ruff's findings ``(code, row)`` for each program, from one ruff run over all of them.

    Raises:
        RuntimeError: ruff failed (not: found problems).
    """
    if not programs:
        return []
    with tempfile.TemporaryDirectory(prefix="crucible-ruff-") as tmp:
        for index, program in enumerate(programs):
            Path(tmp, f"p{index}.py").write_text(_normalised(program), encoding="utf-8")
        done = subprocess.run(
            [*_ruff_command(), tmp], capture_output=True, text=True, timeout=RUFF_TIMEOUT_S, cwd=tmp
        )
    if done.returncode != 0:
        raise RuntimeError(f"ruff failed ({done.returncode}): {done.stderr[-500:]}")
    found: list[list[tuple[str | None, int]]] = [[] for _ in programs]
    for item in json.loads(done.stdout or "[]"):
        index = int(Path(item["filename"]).stem[1:])
        found[index].append((item.get("code"), int(item["location"]["row"])))
    return found


def _normalised(program: str) -> str:
    return program if program.endswith("\n") else program + "\n"


def prompt_lines(code: str, prompt: str) -> int:
    """How many leading lines of ``code`` are the prompt's alone (0 when ``code`` does not
    start with ``prompt``). A prompt that does not end with a newline shares its last line
    with the completion, which then counts as the completion's."""
    if not prompt or not code.startswith(prompt):
        return 0
    return prompt.count("\n")


def _functions(blocks):
    for block in blocks:
        if isinstance(block, Function):
            yield block
            yield from _functions(block.closures)
        elif isinstance(block, Class):
            yield from _functions(block.inner_classes)  # its methods are listed on their own


def figures_from(code: str, skip_lines: int, ruff: list[tuple[str | None, int]]) -> QualityFigures:
    """The figures of ``code`` whose first ``skip_lines`` lines are the prompt's, given ruff's
    findings for it."""
    try:
        module = ast.parse(code)
        blocks = cc_visit(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return QualityFigures(parsed=False)
    statements = sum(
        1 for node in ast.walk(module) if isinstance(node, ast.stmt) and node.lineno > skip_lines
    )
    decisions = sum(max(0, f.complexity - 1) for f in _functions(blocks) if f.endline > skip_lines)
    kept = [code_ for code_, row in ruff if row > skip_lines]
    return QualityFigures(
        parsed=True,
        logical_lines=max(1, statements),
        lint_weight=sum(finding_weight(c) for c in kept),
        decision_points=decisions,
        findings=tuple(c or "syntax" for c in kept),
    )


def score(sub: QualityFigures, ref: QualityFigures | None) -> float:
    """The quality score of ``sub`` against ``ref`` (see the module's docstring)."""
    if not sub.parsed:
        return 0.0
    ref = ref if ref is not None and ref.parsed else CLEAN
    lint = math.exp(-LINT_SLOPE * max(0.0, sub.lint_density - ref.lint_density))
    complexity = math.exp(
        -COMPLEXITY_SLOPE * max(0.0, sub.complexity_density - ref.complexity_density)
    )
    return LINT_SHARE * lint + (1 - LINT_SHARE) * complexity


# Figures by program: the code's hash and how many prompt lines it skips -> figures.
_cache: OrderedDict[tuple[str, int], QualityFigures] = OrderedDict()
# The reference's figures by task version id (and the hash of prompt + reference).
_reference_cache: OrderedDict[tuple[int, str], QualityFigures] = OrderedDict()
_lock = threading.Lock()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _remember(cache: OrderedDict, key, value) -> None:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)


def _lookup(cache: OrderedDict, key):
    with _lock:
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
        return value


def measure_many(items: list[tuple[str, str]]) -> list[QualityFigures]:
    """The figures of each ``(code, prompt)``, with one ruff run for those not cached."""
    keys = [(_digest(code), prompt_lines(code, prompt)) for code, prompt in items]
    out: list[QualityFigures | None] = [_lookup(_cache, key) for key in keys]
    todo: dict[tuple[str, int], int] = {}
    for index, value in enumerate(out):
        if value is None and keys[index] not in todo:
            todo[keys[index]] = index
    if todo:
        indices = list(todo.values())
        linted = ruff_findings([items[i][0] for i in indices])
        for index, ruff in zip(indices, linted):
            _remember(_cache, keys[index], figures_from(items[index][0], keys[index][1], ruff))
    return [
        value if value is not None else _lookup(_cache, key) or _measure_uncached(items[i])
        for i, (value, key) in enumerate(zip(out, keys))
    ]


def _measure_uncached(item: tuple[str, str]) -> QualityFigures:
    code, prompt = item  # only when the cache was trimmed between store and read (huge batches)
    return figures_from(code, prompt_lines(code, prompt), ruff_findings([code])[0])


def measure(code: str, prompt: str = "") -> QualityFigures:
    """The figures of one program (prompt + completion)."""
    return measure_many([(code, prompt)])[0]


def _reference_key(task) -> tuple[int, str]:
    return (
        int(getattr(task, "task_version_id", 0) or 0),
        _digest(task.prompt + "\0" + task.reference_solution),
    )


def reference_figures_many(tasks: list) -> list[QualityFigures | None]:
    """The reference solution's figures of each task (None without a reference), cached per
    task version id."""
    keys = [_reference_key(t) if t.reference_solution.strip() else None for t in tasks]
    found = {key: _lookup(_reference_cache, key) for key in keys if key}
    missing = {key: t for key, t in zip(keys, tasks) if key and found[key] is None}
    if missing:
        measured = measure_many(
            [(t.prompt + t.reference_solution, t.prompt) for t in missing.values()]
        )
        for key, figures in zip(missing, measured):
            _remember(_reference_cache, key, figures)
            found[key] = figures
    return [found[key] if key else None for key in keys]


def quality_batch(submissions: list[GradedSubmission]) -> list[float]:
    """The quality score of each submission: one ruff run for every program (references and
    submissions) not measured before. Fills the cache :func:`quality` reads."""
    if not submissions:
        return []
    tasks = [s.task for s in submissions]
    # One ruff run for references and submissions alike.
    pending = [
        (t.prompt + t.reference_solution, t.prompt)
        for t in tasks
        if t.reference_solution.strip() and _lookup(_reference_cache, _reference_key(t)) is None
    ]
    measure_many(pending + [(s.code, s.task.prompt) for s in submissions])
    references = reference_figures_many(tasks)
    figures = measure_many([(s.code, s.task.prompt) for s in submissions])
    return [score(f, r) for f, r in zip(figures, references)]


@reward("quality", gated=True)  # times correctness: see training/rewards/registry.py
def quality(submission: GradedSubmission) -> float:
    """Lint findings (ruff) and decision points (radon) per logical line of the completion,
    against the reference's: 1.0 as clean and simple as the reference, lower for worse, 0 for
    code that does not parse (formula in the module's docstring). Cached: after
    :func:`quality_batch` over the same submissions this is a lookup."""
    return quality_batch([submission])[0]


quality.batch = quality_batch
