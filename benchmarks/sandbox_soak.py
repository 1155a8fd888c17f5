"""Sandbox soak: mixed hostile and honest executions through the queue for N minutes, then the
host's state compared with before (leftover processes, mounts, cgroups, worker memory).

Starts its own ``sandbox_worker`` for Python and for Node (2 slots each), sends batches that
mix the HumanEval canonical solutions (which must pass), the adversarial corpus of
``tests/sandboxes`` (which must never pass) and HumanEval-X JavaScript solutions, and
prints JSON: executions by status, false passes, honest failures, and before/after
figures for processes of the sandbox user, host mounts, crucible cgroups and the workers'
resident memory (RSS of each worker and its sandboxes).

Run: ``.venv/bin/python benchmarks/sandbox_soak.py --minutes 10``.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from console.core.stack import Stack  # noqa: E402
from sandboxes import cgroups  # noqa: E402
from sandboxes import result as R  # noqa: E402
from sandboxes.process import Limits  # noqa: E402
from sandboxes.queue import javascript_tests, live_workers, python_tests, run_many  # noqa: E402
from tasks_library.importers.humaneval import default_path  # noqa: E402
from tasks_library.importers.humaneval_js import default_path as js_default_path  # noqa: E402
from tests.sandboxes.test_adversarial_corpus import CORPUS, TESTS  # noqa: E402

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
        for each in [pid, *_children(pid)]:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
    return {
        "sandbox_user_processes": len(ps),
        "host_mounts": mounts,
        "crucible_cgroups": groups,
        "workers_rss_bytes": rss,
    }


def _children(pid: int) -> list[int]:
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        out += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    with gzip.open(default_path(), "rt", encoding="utf-8") as handle:
        python_rows = [json.loads(line) for line in handle]
    with gzip.open(js_default_path(), "rt", encoding="utf-8") as handle:
        js_rows = [json.loads(line) for line in handle]
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
        entry = re.search(r"(?:const|function)\s+([A-Za-z_$][\w$]*)", row["declaration"]).group(1)
        kind = "broken-dataset" if row["task_id"] in BROKEN_JS else "honest"
        honest.append(
            (
                javascript_tests(
                    row["prompt"] + row["canonical_solution"],
                    row["test"],
                    entry,
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
    with Stack() as stack:
        stack.redis()
        if live_workers("python") or live_workers("node"):
            sys.exit("a sandbox worker is already running; stop it so the soak measures its own")
        stack.sandbox_workers("python", concurrency=2)
        stack.sandbox_workers("node", concurrency=2)
        workers = [proc.pid for name, proc in stack.started if name.startswith("sandbox-")]
        run_many([item for item, _ in honest[:4]])  # warm
        before = host_state(workers)
        deadline = time.monotonic() + args.minutes * 60
        batches = 0
        while time.monotonic() < deadline:
            batch = rng.sample(honest, 24) + rng.sample(hostile, 8)
            rng.shuffle(batch)
            for (item, kind), result in zip(batch, run_many([item for item, _ in batch])):
                counts[result.status] += 1
                if kind == "hostile" and result.status == R.OK:
                    false_passes.append(result.to_dict())
                if kind == "honest" and result.status != R.OK:
                    honest_failures.append({"status": result.status, "detail": result.detail[:200]})
            batches += 1
        time.sleep(3)  # let the last trees' teardown finish
        after = host_state(workers)
    print(
        json.dumps(
            {
                "minutes": args.minutes,
                "batches": batches,
                "executions": sum(counts.values()),
                "by_status": dict(counts),
                "false_passes": len(false_passes),
                "honest_failures": honest_failures[:20],
                "honest_failure_count": len(honest_failures),
                "before": before,
                "after": after,
                "workers_rss_growth_bytes": after["workers_rss_bytes"]
                - before["workers_rss_bytes"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
