"""Elastic sandbox pool on the local backend: how fast the pool follows a step-shaped demand.

``sandbox_worker --min-workers 1 --max-workers M --concurrency C`` (sandboxes/autoscale.py)
runs against its own Redis database (of the embedded Redis, or of REDIS_URL), so no other
worker takes part. Demand goes idle -> step -> idle, twice:

* **announced**: a trainer announces a rollout of ``M * C`` executions (sandboxes/demand.py)
  before it queues anything, then its update phase (demand 0);
* **burst**: ``N`` real executions (each a test of a program that sleeps ``S`` s) are queued
  at once; nothing is announced.

For each: ``decision_ms`` (demand published or queued -> the autoscaler's target reaches M),
``scale_up_ms`` (-> M * C live slots, i.e. every new worker heart-beating), ``scale_down_ms``
(demand gone -> back to the floor's slots; includes the scale-down delay and the drain);
for the burst also ``all_answered_ms``, ``lost`` (executions not answered ``ok``: must be 0),
``peak_workers`` and ``peak_slots``. Then the same burst on a fixed pool at the floor
(``--max-workers 1``) for comparison: ``burst_speedup`` is its time to answer all over the
elastic pool's.

Run: ``.venv/bin/python benchmarks/sandbox_autoscale.py [--max-workers 3 --executions 16
--seconds 1]`` (about a minute on two cores; ``--quick``, what CI runs: 2 workers at most, a
burst of 8 executions of 0.5 s, 1 s scale-down delay). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import redis
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from sandboxes import demand as D
from sandboxes import queue as Q
from sandboxes import result as R

ROOT = common.ROOT
ISOLATED_DB = 15
TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"


def with_db(url: str, db: int) -> str:
    """``url`` (``redis://host:port/N`` or ``unix:///path?db=N``) pointing at database ``db``."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return f"{url.split('?', 1)[0]}?{urlencode({**query, 'db': db})}"
    return urlunsplit(parts._replace(path=f"/{db}"))


class Watcher(threading.Thread):
    """Samples the pool every 20 ms: live slots (heartbeats) and the autoscaler's state."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, dict]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.02):
            signals = D.pool_signals("python")
            self.samples.append((time.monotonic(), signals.slots, signals.autoscaler or {}))

    def first(self, after: float, check) -> float | None:
        """Milliseconds from ``after`` to the first sample where ``check(slots, state)``."""
        for at, slots, state in list(self.samples):
            if at >= after and check(slots, state):
                return round((at - after) * 1000, 1)
        return None

    def wait(self, after: float, check, timeout_s: float = 120) -> float:
        deadline = time.monotonic() + timeout_s
        while (found := self.first(after, check)) is None:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"the pool did not get there within {timeout_s:.0f} s; "
                    f"last: {self.samples[-1:]}"
                )
            time.sleep(0.02)
        return found

    def peak(self, after: float) -> tuple[int, int]:
        seen = [
            (state.get("workers", 0), slots)
            for at, slots, state in list(self.samples)
            if at >= after
        ]
        return max(w for w, _s in seen), max(s for _w, s in seen)


def start_pool(url: str, *, max_workers: int, concurrency: int, delay_s: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "sandbox_worker",
            "--runtime",
            "python",
            "--min-workers",
            "1",
            "--max-workers",
            str(max_workers),
            "--concurrency",
            str(concurrency),
            "--scale-interval",
            "0.5",
            "--scale-down-delay",
            str(delay_s),
        ],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc


def stop_pool(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def burst(count: int, seconds: float) -> tuple[float, list]:
    program = f"import time\ndef square(x):\n    time.sleep({seconds})\n    return x * x\n"
    batch = Q.submit([Q.python_tests(program, TESTS, "square") for _ in range(count)])
    return batch.submitted, batch.wait(timeout_s=300)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2, help="slots per worker process")
    parser.add_argument("--executions", type=int, default=16, help="executions in the burst")
    parser.add_argument("--seconds", type=float, default=1.0, help="each execution's own run time")
    parser.add_argument("--scale-down-delay", type=float, default=3.0)
    args = common.parse_args(
        parser, {"max_workers": 2, "executions": 8, "seconds": 0.5, "scale_down_delay": 1.0}
    )
    with common.private_var_dir(migrate=False):
        out = measure(args)
    print(json.dumps(out, indent=2))


def measure(args) -> dict:
    floor_slots, ceiling_slots = args.concurrency, args.max_workers * args.concurrency
    with Stack() as stack:
        stack.redis()
        url = with_db(settings.REDIS_URL, ISOLATED_DB)
        isolated = redis.Redis.from_url(url)
        isolated.flushdb()
        settings.REDIS_URL = url
        Q.connection.cache_clear()
        watcher = Watcher()
        watcher.start()

        def at_floor(slots, state):
            return slots == floor_slots and state.get("draining") == 0

        def at_ceiling_target(slots, state):
            return state.get("target") == args.max_workers

        def at_ceiling(slots, state):
            return slots == ceiling_slots

        pool = start_pool(
            url,
            max_workers=args.max_workers,
            concurrency=args.concurrency,
            delay_s=args.scale_down_delay,
        )
        try:
            started = time.monotonic()
            first_ready_ms = watcher.wait(started, at_floor, timeout_s=60)

            # 1. announced: a trainer's rollout, then its update
            t0 = time.monotonic()
            D.publish("bench-trainer", phase="rollout", demand={"python": ceiling_slots})
            announced = {
                "demand": ceiling_slots,
                "decision_ms": watcher.wait(t0, at_ceiling_target),
                "scale_up_ms": watcher.wait(t0, at_ceiling),
            }
            time.sleep(1.0)
            t1 = time.monotonic()
            D.publish("bench-trainer", phase="update", demand={"python": 0})
            announced["scale_down_ms"] = watcher.wait(t1, at_floor)
            D.withdraw("bench-trainer", ["python"])

            # 2. a burst of real executions, nothing announced
            submitted, results = burst(args.executions, args.seconds)
            answered = time.monotonic()
            peak_workers, peak_slots = watcher.peak(submitted)
            elastic = {
                "executions": args.executions,
                "decision_ms": watcher.first(submitted, at_ceiling_target),
                "scale_up_ms": watcher.first(submitted, at_ceiling),
                "all_answered_ms": round((answered - submitted) * 1000, 1),
                "scale_down_ms": watcher.wait(answered, at_floor),
                "lost": sum(1 for r in results if r.status != R.OK),
                "peak_workers": peak_workers,
                "peak_slots": peak_slots,
            }
        finally:
            stop_pool(pool)
        left_behind = isolated.llen(Q.pending_key("python"))

        # 3. the same burst on a fixed pool at the floor
        fixed = start_pool(
            url, max_workers=1, concurrency=args.concurrency, delay_s=args.scale_down_delay
        )
        try:
            watcher.wait(time.monotonic(), at_floor, timeout_s=60)
            submitted, results = burst(args.executions, args.seconds)
            fixed_ms = round((time.monotonic() - submitted) * 1000, 1)
            fixed_lost = sum(1 for r in results if r.status != R.OK)
        finally:
            stop_pool(fixed)
            watcher.stopping.set()
            isolated.flushdb()

    return {
        "quick": args.quick,
        "backend": "local",
        "pool": {
            "min_workers": 1,
            "max_workers": args.max_workers,
            "slots_per_worker": args.concurrency,
            "scale_interval_s": 0.5,
            "scale_down_delay_s": args.scale_down_delay,
            "execution_s": args.seconds,
            "cpus": os.cpu_count(),
        },
        "first_worker_ready_ms": first_ready_ms,
        "announced": announced,
        "burst": elastic,
        "fixed_floor_pool": {
            "executions": args.executions,
            "all_answered_ms": fixed_ms,
            "lost": fixed_lost,
        },
        "burst_speedup_elastic_over_fixed": round(fixed_ms / elastic["all_answered_ms"], 3),
        "requests_left_in_queue": left_behind,
    }


if __name__ == "__main__":
    main()
