"""Sandbox soak: mixed hostile and honest executions through the queue for N minutes, then the
host's state compared with before (leftover processes, mounts, cgroups, worker memory).

Starts its own ``sandbox_worker`` for Python and for Node (2 slots each), sends batches that
mix the HumanEval canonical solutions (which must pass), the adversarial corpus of
``tests/sandboxes`` (which must never pass) and HumanEval-X JavaScript solutions, and
prints JSON: executions by status, false passes, honest failures, and before/after
figures for processes of the sandbox user, host mounts, crucible cgroups and the workers'
resident memory (RSS of each worker and its sandboxes).

With ``--sessions`` it soaks sandbox sessions instead (``sandboxes/sessions/``): its own
``sandbox_worker --concurrency 0 --session-slots 2``, and 4 threads that each, over and over,
open a session and make dozens of calls in it: honest ones (write, run, read, diff, a small
unittest suite, all of which must pass) or the hostile calls of
``tests/sandboxes/test_session_adversarial_corpus.py`` (daemons, fork bombs, floods, memory
and disk fills, escapes; some with kept processes), then close it or abandon it (its lease
must close it). It prints calls by status, infra errors (there must be none), honest
failures, and before/after figures: the worker's descendant processes, its session
cgroups, the overlay mounts its sessions hold, its workspace store's entries, its slots'
sessions, and the PSS of the worker and its descendants.

Run: ``.venv/bin/python benchmarks/sandbox_soak.py --minutes 10`` (``--sessions`` for sessions).
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
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from benchmarks.sandbox_sessions import descendants, pss, start_worker, suite_repository  # noqa: E402
from console.stack import Stack  # noqa: E402
from sandboxes import cgroups  # noqa: E402
from sandboxes import result as R  # noqa: E402
from sandboxes.process import Limits  # noqa: E402
from sandboxes.queue import (  # noqa: E402
    connection,
    javascript_tests,
    live_workers,
    python_tests,
    run_many,
)
from sandboxes.sessions import (  # noqa: E402
    SessionError,
    SessionFileNotFound,
    SessionLimits,
    open_session,
    routing,
)
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


def session_host_state(worker_pid: int, store: Path, slots: list[str]) -> dict:
    """What the session worker holds on the host now (see the module)."""
    under = descendants(worker_pid)
    prefix = f"x-{worker_pid}-"
    groups = (
        sum(
            1
            for c in cgroups.CONTROLLERS
            for _ in (cgroups.ROOT / c / cgroups.PARENT).glob(prefix + "*")
        )
        if cgroups.available()
        else 0
    )
    overlays = 0
    for pid in under:
        try:
            overlays += Path(f"/proc/{pid}/mountinfo").read_text().count(" - overlay ")
        except OSError:
            continue
    client = connection()
    return {
        "worker_descendants": len(under),
        "session_cgroups": groups,
        "overlay_mounts_seen_by_its_processes": overlays,
        "store_entries": len(list(store.iterdir())) if store.is_dir() else 0,
        "sessions_held": sum(int(client.get(routing.load_key(s)) or 0) for s in slots),
        "worker_and_descendants_pss_bytes": pss([worker_pid, *under]),
        "worker_pss_bytes": pss([worker_pid]),
        "host_mounts": len(Path("/proc/self/mountinfo").read_text().splitlines()),
    }


HONEST_CALLS = [
    ("write", "calc/extra.py", "def triple(x):\n    return 3 * x\n"),
    ("exec", "python3 -m unittest discover -q -s tests -t ."),
    ("exec", "python3 -c 'from calc import extra; print(extra.triple(4))'"),
    ("read", "calc/extra.py"),
    ("exec", "ls -R | wc -l && echo made > made.txt && cat made.txt"),
    ("diff",),
    ("exec", "grep -rn def calc | wc -l"),
]


def soak_sessions(minutes: float, warmup_minutes: float = 1.0) -> dict:
    """Sessions under load for ``minutes`` after ``warmup_minutes`` of the same (see the
    module): the before figures are taken once the warm-up has settled (sessions closed,
    leases run out, unused workspaces deleted), so that what grows after is growth, not the
    worker's first use of its threads and allocator arenas; its PSS is sampled every minute."""
    from tests.sandboxes.test_session_adversarial_corpus import (  # noqa: PLC0415 (the sessions soak alone needs it)
        CORPUS as SESSION_CORPUS,
    )
    from tests.sandboxes.test_session_adversarial_corpus import WORKSPACE, Exec  # noqa: PLC0415

    hostile = [
        (case, step)
        for case in SESSION_CORPUS
        for step in case.steps
        if isinstance(step, Exec) and "{" not in step.command
    ]
    counts: collections.Counter = collections.Counter()
    problems: list[str] = []
    lock = threading.Lock()
    stop_at = 0.0  # set by run_for
    honest_workspace = suite_repository()
    sessions_opened = collections.Counter()

    def note(kind: str, status: str, detail: str = "") -> None:
        with lock:
            counts[f"{kind}:{status}"] += 1
            if status == R.INFRA_ERROR or (kind == "honest" and status != R.OK):
                if len(problems) < 30:
                    problems.append(f"{kind} {status}: {detail[:300]}")

    def one_session(rng: random.Random, slots: list[str]) -> None:
        honest = rng.random() < 0.5
        keep = not honest and rng.random() < 0.3
        abandon = rng.random() < 0.15
        limits = SessionLimits(
            memory_bytes=256 * 1024**2,
            processes=48,
            workspace_bytes=32 * 1024**2,
            workspace_inodes=2048,
            tmp_bytes=16 * 1024**2,
            shm_bytes=8 * 1024**2,
            idle_timeout_s=2.0 if abandon else 60.0,
            keep_processes=keep,
        )
        workspace = honest_workspace if honest else WORKSPACE
        try:
            session = open_session(workspace, limits=limits, slot=rng.choice(slots))
        except SessionError as exc:
            note("open", getattr(exc, "status", exc.kind), str(exc))
            return
        sessions_opened["abandoned" if abandon else "closed"] += 1
        for index in range(rng.randint(20, 40)):
            if time.monotonic() > stop_at:
                break
            if honest:  # in order, over and over: the write comes before its use
                call = HONEST_CALLS[index % len(HONEST_CALLS)]
                try:
                    if call[0] == "exec":
                        result = session.exec(call[1], timeout_s=60)
                        note("honest", result.status, result.stderr + result.detail)
                    elif call[0] == "write":
                        session.write(call[1], call[2])
                        note("honest", R.OK)
                    elif call[0] == "read":
                        session.read(call[1])
                        note("honest", R.OK)
                    else:
                        session.diff()
                        note("honest", R.OK)
                except SessionFileNotFound:
                    note("honest", R.OK)  # read before its write: fine
                except SessionError as exc:
                    note("honest", getattr(exc, "status", exc.kind), str(exc))
            else:
                _case, step = rng.choice(hostile)
                result = session.exec(step.command, timeout_s=min(step.timeout_s, 3))
                note("hostile", result.status, result.detail or result.stderr)
        if not abandon:
            session.close()

    def loop(seed: int, slots: list[str]) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop_at:
            one_session(rng, slots)

    def run_for(span_minutes: float, seed: int, slots: list[str]) -> None:
        nonlocal stop_at
        stop_at = time.monotonic() + span_minutes * 60
        threads = [
            threading.Thread(target=loop, args=(seed + k, slots), daemon=True) for k in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def settled(proc, store, slots, baseline) -> dict:
        """The host state once leases and the store's keep time have run (at most 2 min)."""
        deadline = time.monotonic() + 120
        keys = ("sessions_held", "session_cgroups", "store_entries")
        while True:
            state = session_host_state(proc.pid, store, slots)
            if all(state[key] <= baseline[key] for key in keys) or time.monotonic() > deadline:
                return state
            time.sleep(1)

    with Stack() as stack:
        stack.redis()
        proc, slots = start_worker()
        store = Path(settings.VAR_DIR) / "sandbox-sessions" / slots[0].rsplit("-s", 1)[0]
        try:
            idle = session_host_state(proc.pid, store, slots)
            run_for(warmup_minutes, 100, slots)
            before = settled(proc, store, slots, idle)
            samples: list[float] = []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.wait(60):
                    samples.append(round(pss([proc.pid]) / 2**20, 1))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            run_for(minutes, 0, slots)
            sampling.set()
            after = settled(proc, store, slots, idle)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {
        "mode": "sessions",
        "minutes": minutes,
        "warmup_minutes": warmup_minutes,
        "sessions": dict(sessions_opened),
        "calls": sum(counts.values()),
        "by_kind_and_status": dict(sorted(counts.items())),
        "infra_errors": sum(n for key, n in counts.items() if key.endswith(":" + R.INFRA_ERROR)),
        "honest_failures": sum(
            n for key, n in counts.items() if key.startswith("honest:") and not key.endswith(":ok")
        ),
        "problems": problems,
        "before": before,
        "after": after,
        "pss_growth_bytes": after["worker_and_descendants_pss_bytes"]
        - before["worker_and_descendants_pss_bytes"],
        "worker_pss_mb_each_minute": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sessions", action="store_true", help="soak sandbox sessions instead")
    parser.add_argument(
        "--warmup-minutes", type=float, default=1.0, help="sessions: before the before figures"
    )
    args = parser.parse_args()
    if args.sessions:
        print(json.dumps(soak_sessions(args.minutes, args.warmup_minutes), indent=2))
        return
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
