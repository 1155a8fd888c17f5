"""Sandbox soak: mixed hostile and honest executions through the queue for N minutes, then the
host's state compared with before (leftover processes, mounts, cgroups, worker memory).

Starts its own ``sandbox_worker`` for Python and for Node (2 slots each), sends batches that
mix the HumanEval canonical solutions (which must pass), the adversarial corpus of
``tests/sandboxes`` (which must never pass) and HumanEval-X JavaScript solutions, and
prints JSON: executions by status, false passes, honest failures, and before/after
figures for the workers' own descendant processes of the sandbox user (not the machine's),
host mounts, crucible cgroups and the workers' resident memory (RSS of each worker and its
sandboxes).

With ``--sessions`` it soaks sandbox sessions instead (``sandboxes/sessions/``): its own
``sandbox_worker --concurrency 0 --session-slots 2``, and 4 threads that each, over and over,
open a session and make dozens of calls in it: honest ones (write, run, read, diff, a small
unittest suite, all of which must pass) or the hostile calls of
``tests/sandboxes/sessions/test_session_adversarial_corpus.py`` (daemons, fork bombs, floods, memory
and disk fills, escapes; some with kept processes), then close it or abandon it (its lease
must close it). It prints calls by status, infra errors (there must be none), honest
failures, and before/after figures: the worker's descendant processes, its session
cgroups, the overlay mounts its sessions hold, its workspace store's entries, its slots'
sessions, and the PSS of the worker and its descendants.

The hostile programs are the sandbox tests' corpus (``tests/sandboxes``, which imports pytest:
install ``requirements-dev.txt``).

Run: ``.venv/bin/python benchmarks/sandbox_soak.py --minutes 10`` (``--sessions`` for sessions);
``--quick`` (what CI runs, both ways) is the same workload and checks for 0.1 minute (a few
batches of 32; sessions: after a warm-up of 3 seconds, each reading waiting at most 10 seconds
for leases to run out, not the store's minute).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from django.conf import settings

from benchmarks import common
from benchmarks.sandbox_sessions import suite_repository
from console.management.stack import Stack
from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.process import Limits
from sandboxes.queue import connection, javascript_tests, python_tests, run_many
from sandboxes.sessions import (
    SessionError,
    SessionFileNotFound,
    SessionLimits,
    open_session,
    routing,
)

BROKEN_JS = {"JavaScript/112", "JavaScript/155", "JavaScript/162"}  # fail under plain node too
HOSTILE_LIMITS = Limits(wall_timeout_s=3, cpu_s=3, memory_bytes=512 * 1024**2)


def host_state(worker_pids: list[int]) -> dict:
    """Before/after figures of the workers under test only (other jobs on the machine do not
    count): their descendants running as the sandbox user, their RSS, and the host's mounts and
    Crucible cgroups."""
    sandbox_uid = 65534 if os.geteuid() == 0 else os.geteuid()  # nobody, or our own user
    mounts = len(Path("/proc/self/mountinfo").read_text().splitlines())
    groups = (
        sum(1 for c in cgroups.CONTROLLERS for _ in (cgroups.ROOT / c / cgroups.PARENT).glob("*"))
        if cgroups.available()
        else 0
    )
    rss, sandboxed = 0, 0
    for pid in worker_pids:
        for each in [pid, *common.descendants(pid)]:
            with contextlib.suppress(FileNotFoundError):  # a tree that just ended
                for line in Path(f"/proc/{each}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Uid:") and each != pid:
                        sandboxed += int(line.split()[1]) == sandbox_uid
    return {
        "sandbox_user_processes": sandboxed,
        "host_mounts": mounts,
        "crucible_cgroups": groups,
        "workers_rss_bytes": rss,
    }


def session_host_state(worker_pid: int, store: Path, slots: list[str]) -> dict:
    """What the session worker holds on the host now (see the module)."""
    under = common.descendants(worker_pid)
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
        "worker_and_descendants_pss_bytes": common.pss([worker_pid, *under]),
        "worker_pss_bytes": common.pss([worker_pid]),
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


def soak_sessions(stack, args) -> dict:
    """Sessions under load for ``args.minutes`` after ``args.warmup_minutes`` of the same (see
    the module): the before figures are taken once the warm-up has settled (sessions closed,
    leases run out, unused workspaces deleted; at most ``args.settle_s``), so that what grows
    after is growth, not the worker's first use of its threads and allocator arenas; its PSS is
    sampled every minute."""
    # the corpus of hostile calls lives with the sandbox tests
    from tests.sandboxes.sessions.test_session_adversarial_corpus import (  # noqa: PLC0415 (after django.setup)
        CORPUS as SESSION_CORPUS,
    )
    from tests.sandboxes.sessions.test_session_adversarial_corpus import (  # noqa: PLC0415 (after django.setup)
        WORKSPACE,
        Exec,
    )

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
        """The host state once leases and the store's keep time have run (at most
        ``args.settle_s``: 2 min by default)."""
        deadline = time.monotonic() + args.settle_s
        keys = ("sessions_held", "session_cgroups", "store_entries")
        while True:
            state = session_host_state(proc.pid, store, slots)
            if all(state[key] <= baseline[key] for key in keys) or time.monotonic() > deadline:
                return state
            time.sleep(1)

    proc, slots = common.own_session_worker(stack)
    store = Path(settings.VAR_DIR) / "sandbox-sessions" / slots[0].rsplit("-s", 1)[0]
    try:
        idle = session_host_state(proc.pid, store, slots)
        run_for(args.warmup_minutes, 100, slots)
        before = settled(proc, store, slots, idle)
        samples: list[float] = []
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(60):
                samples.append(round(common.pss([proc.pid]) / 2**20, 1))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        run_for(args.minutes, 0, slots)
        sampling.set()
        after = settled(proc, store, slots, idle)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {
        "quick": args.quick,
        "mode": "sessions",
        "minutes": args.minutes,
        "warmup_minutes": args.warmup_minutes,
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sessions", action="store_true", help="soak sandbox sessions instead")
    parser.add_argument(
        "--warmup-minutes", type=float, default=1.0, help="sessions: before the before figures"
    )
    parser.add_argument(
        "--settle-s",
        type=float,
        default=120.0,
        help="sessions: at most this long for leases and the store's keep time to run before "
        "each reading",
    )
    args = common.parse_args(parser, {"minutes": 0.1, "warmup_minutes": 0.05, "settle_s": 10.0})
    with common.private_var_dir(migrate=False), Stack() as stack:
        out = soak_sessions(stack, args) if args.sessions else soak(stack, args)
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
