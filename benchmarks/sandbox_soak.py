"""Sandbox soak: mixed hostile and honest executions through the queue for N minutes, then the
host's state compared with before (leftover processes, mounts, cgroups, worker memory).

Starts its own ``sandbox_worker`` for Python and for Node (2 slots each), sends batches that
mix the HumanEval canonical solutions (which must pass), the adversarial corpus of
``tests/sandboxes`` (which must never pass) and HumanEval-X JavaScript solutions, and
prints JSON: executions by status, false passes, honest failures, and before/after
figures for processes of the sandbox user, host mounts, crucible cgroups and the workers'
resident memory (RSS of each worker and its sandboxes).

The hostile programs are the sandbox tests' corpus (``tests/sandboxes``, which imports pytest:
install ``requirements-dev.txt``).

Run: ``.venv/bin/python benchmarks/sandbox_soak.py --minutes 10``; ``--quick`` (what CI runs) is
the same workload and checks for 0.1 minute (a few batches of 32).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.core.stack import Stack
from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import javascript_tests, python_tests, run_many

BROKEN_JS = {"JavaScript/112", "JavaScript/155", "JavaScript/162"}  # fail under plain node too
HOSTILE_LIMITS = Limits(wall_timeout_s=3, cpu_s=3, memory_bytes=512 * 1024**2)


def host_state(worker_pids: list[int]) -> dict:
    user = "nobody" if os.geteuid() == 0 else str(os.geteuid())
    ps = subprocess.run(
        ["ps", "-u", user, "-o", "pid="], capture_output=True, text=True
    ).stdout.split()
    mounts = len(Path("/proc/self/mountinfo").read_text().splitlines())
    groups = (
        sum(1 for c in cgroups.CONTROLLERS for _ in (cgroups.ROOT / c / cgroups.PARENT).glob("*"))
        if cgroups.available()
        else 0
    )
    rss = 0
    for pid in worker_pids:
        for each in [pid, *common.descendants(pid)]:
            with contextlib.suppress(FileNotFoundError):  # a tree that just ended
                for line in Path(f"/proc/{each}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) * 1024
    return {
        "sandbox_user_processes": len(ps),
        "host_mounts": mounts,
        "crucible_cgroups": groups,
        "workers_rss_bytes": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = common.parse_args(parser, {"minutes": 0.1})
    with common.private_var_dir(migrate=False), Stack() as stack:
        out = soak(stack, args)
    print(json.dumps(out, indent=2))


def soak(stack, args) -> dict:
    # the corpus of hostile programs lives with the sandbox tests
    from tests.sandboxes.test_adversarial_corpus import (  # noqa: PLC0415 (after django.setup)
        CORPUS,
        TESTS,
    )

    python_rows = common.humaneval_rows()
    js_rows = common.humaneval_js_rows()
    honest = [
        (
            python_tests(
                r["prompt"] + r["canonical_solution"],
                r["test"],
                r["entry_point"],
                prompt=r["prompt"],
            ),
            "honest",
        )
        for r in python_rows
    ]
    for row in js_rows:
        kind = "broken-dataset" if row["task_id"] in BROKEN_JS else "honest"
        honest.append(
            (
                javascript_tests(
                    row["prompt"] + row["canonical_solution"],
                    row["test"],
                    row["entry_point"],
                    prompt=row["prompt"],
                ),
                kind,
            )
        )
    hostile = [
        (python_tests(case.program, TESTS, "add", limits=HOSTILE_LIMITS), "hostile")
        for case in CORPUS
    ]
    rng = random.Random(0)
    counts: collections.Counter = collections.Counter()
    false_passes, honest_failures = [], []
    workers = [
        common.own_sandbox_workers(stack, "python", 2),
        common.own_sandbox_workers(stack, "node", 2),
    ]
    run_many([item for item, _ in honest[:4]])  # warm
    before = host_state(workers)
    deadline = time.monotonic() + args.minutes * 60
    batches = 0
    while time.monotonic() < deadline:
        batch = rng.sample(honest, 24) + rng.sample(hostile, 8)
        rng.shuffle(batch)
        for (_item, kind), result in zip(batch, run_many([item for item, _ in batch]), strict=True):
            counts[result.status] += 1
            if kind == "hostile" and result.status == R.OK:
                false_passes.append(result.to_dict())
            if kind == "honest" and result.status != R.OK:
                honest_failures.append({"status": result.status, "detail": result.detail[:200]})
        batches += 1
    time.sleep(3)  # let the last trees' teardown finish
    after = host_state(workers)
    return {
        "quick": args.quick,
        "minutes": args.minutes,
        "batches": batches,
        "executions": sum(counts.values()),
        "by_status": dict(counts),
        "false_passes": len(false_passes),
        "honest_failures": honest_failures[:20],
        "honest_failure_count": len(honest_failures),
        "before": before,
        "after": after,
        "workers_rss_growth_bytes": after["workers_rss_bytes"] - before["workers_rss_bytes"],
    }


if __name__ == "__main__":
    main()
