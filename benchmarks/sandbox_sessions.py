"""Sandbox sessions against bubblewrap and unshare started per call, side by side, one run.

Crucible: a ``sandbox_worker --concurrency 0 --session-slots 2`` process (sessions only),
driven through the client API over Redis, as a rollout drives it (``sandboxes/sessions/``):
  * session open, p50/p99: a one-file workspace, and a repository of ``repo_files`` files and
    ``repo_bytes`` bytes (the first open of each is reported apart: it uploads the blob and
    materialises the workspace once for the worker);
  * exec ``true`` and ``python3 -c pass``, p50/p99, and the part of it the worker's host spent
    (the result's ``wall_ms``: the call sent to its answer; the rest is the client and Redis);
  * a small repository's test suite inside a session: ``python3 -m unittest`` (pytest is not
    in the sandbox's Python: the system's; installing packages into environments is issue 18);
  * idle memory per open session with ``idle`` sessions open: the machine's ``MemAvailable``
    drop, the sessions' processes' PSS and their cgroups' usage, each divided by the count.

Peers, on the same workspaces, per call: ``bwrap`` (Debian's bubblewrap) over a persistent host
directory (``--ro-bind`` of the system, ``--bind`` of the directory on ``/workspace``,
``--unshare-all``, ``--die-with-parent``) and ``unshare`` (user, pid, mount, network, ipc,
uts namespaces; it sees the host's whole file system) started per call from Python, as a team
would. A peer's "open" is a copy of the workspace into a fresh directory; an idle peer session
holds no process, only that directory.

Prints JSON: every figure in milliseconds or bytes, ``ratios`` (peer / Crucible, above 1: Crucible
faster) and ``targets`` (issue 17's, with the measured value and whether it was met).

Run: ``.venv/bin/python benchmarks/sandbox_sessions.py`` (``--quick``: small sizes, a few
seconds; ``tests/sandboxes/test_sandbox_sessions_benchmark.py`` runs it so it cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from console.stack import Stack  # noqa: E402
from sandboxes import cgroups  # noqa: E402
from sandboxes import result as R  # noqa: E402
from sandboxes.sessions import Session, Workspace, open_session, routing  # noqa: E402

SIZES = {
    "full": {
        "opens": 200,
        "repo_opens": 100,
        "execs": 500,
        "pythons": 100,
        "suites": 5,
        "idle": 500,
        "repo_files": 1000,
        "repo_bytes": 20 * 1024**2,
        "peer_execs": 200,
        "peer_pythons": 50,
    },
    "quick": {
        "opens": 10,
        "repo_opens": 5,
        "execs": 20,
        "pythons": 3,
        "suites": 1,
        "idle": 10,
        "repo_files": 100,
        "repo_bytes": 2 * 1024**2,
        "peer_execs": 10,
        "peer_pythons": 3,
    },
}
TARGETS = {  # issue 17: (figure, limit, "max" or "min")
    "open_one_file_p50_ms": 10.0,
    "open_repository_p50_ms": 25.0,
    "exec_true_p50_ms": 5.0,
    "per_call_speedup_over_bwrap": 3.0,
    "idle_sessions_total_bytes": 2 * 1024**3,
}
SUITE_MODULES = 10
SUITE_TESTS = 10


def _q(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
        "n": len(ordered),
    }


def one_file() -> Workspace:
    return Workspace.from_files({"solution.py": "def add(a, b):\n    return a + b\n"})


def repository(files: int, size: int) -> Workspace:
    """A synthetic repository: ``files`` files of about ``size / files`` bytes in 50 packages."""
    rng = random.Random(17)
    words = ["alpha", "beta", "gamma", "delta", "value", "return", "self", "data", "index"]
    per_file = size // files
    content = {}
    for index in range(files):
        lines, length = [], 0
        while length < per_file:
            line = " ".join(rng.choice(words) for _ in range(8)) + "\n"
            lines.append(line)
            length += len(line)
        content[f"pkg{index % 50:02d}/module{index:04d}.py"] = "# " + "# ".join(lines)
    return Workspace.from_files(content)


def suite_repository() -> Workspace:
    """A small project with its unittest suite (SUITE_MODULES modules x SUITE_TESTS tests)."""
    files = {"calc/__init__.py": ""}
    for m in range(SUITE_MODULES):
        files[f"calc/mod{m}.py"] = (
            f"def scale(x):\n    return x * {m + 1}\n\n"
            "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"
        )
        tests = [
            f"import unittest\nfrom calc import mod{m}\n\n\nclass Test{m}(unittest.TestCase):\n"
        ]
        for t in range(SUITE_TESTS):
            tests.append(
                f"    def test_{t}(self):\n"
                f"        self.assertEqual(mod{m}.scale({t}), {t * (m + 1)})\n"
                f"        self.assertEqual(mod{m}.fib(20), 6765)\n"
            )
        files[f"tests/test_mod{m}.py"] = "".join(tests)
    files["tests/__init__.py"] = ""
    return Workspace.from_files(files)


SUITE_COMMAND = "python3 -m unittest discover -q -s tests -t ."


# --- Crucible ------------------------------------------------------------------------------


def start_worker() -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "sandbox_worker",
            "--runtime",
            "python",
            "--concurrency",
            "0",
            "--session-slots",
            "2",
        ],
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    banner = proc.stdout.readline()
    if not banner.startswith("sandbox worker "):
        proc.kill()
        sys.exit(f"the session worker did not start: {banner!r}")
    name = banner.split()[2].rstrip(":")
    slots = [f"{name}-s0", f"{name}-s1"]
    deadline = time.monotonic() + 60
    while not set(slots) <= set(routing.live_slots("python")):
        if time.monotonic() > deadline:
            proc.kill()
            sys.exit("the session worker's slots did not come up within 60 s")
        time.sleep(0.05)
    return proc, slots


def bench_opens(workspace: Workspace, count: int, slots: list[str]) -> dict:
    started = time.perf_counter()
    first = open_session(workspace, slot=slots[0])
    first_ms = (time.perf_counter() - started) * 1000
    first.close()
    opens, closes = [], []
    for index in range(count):
        started = time.perf_counter()
        session = open_session(workspace, slot=slots[index % len(slots)])
        opens.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        session.close()
        closes.append((time.perf_counter() - started) * 1000)
    return {
        "first_open_ms": round(first_ms, 3),
        "open_ms": _q(opens),
        "close_ms": _q(closes),
        "workspace_files": sum(1 for e in workspace.entries if e.kind == "file"),
        "workspace_bytes": workspace.size_bytes,
    }


def bench_calls(session: Session, command: str, count: int) -> dict:
    for _ in range(3):
        session.exec(command)
    latencies, host = [], []
    for _ in range(count):
        started = time.perf_counter()
        result = session.exec(command, timeout_s=60)
        latencies.append((time.perf_counter() - started) * 1000)
        if result.status != R.OK:
            sys.exit(f"{command!r} in a session came back {result.status}: {result.stderr[-300:]}")
        host.append(result.wall_ms)
    return {"ms": _q(latencies), "worker_host_ms": _q(host)}


def bench_suite(slots: list[str], runs: int) -> dict:
    workspace = suite_repository()
    with open_session(workspace, slot=slots[0]) as session:
        walls = []
        for _ in range(runs):
            started = time.perf_counter()
            result = session.exec(SUITE_COMMAND, timeout_s=120)
            walls.append((time.perf_counter() - started) * 1000)
            if result.status != R.OK or "OK" not in result.stderr:
                sys.exit(f"the suite failed in a session: {result.stderr[-500:]}")
    return {
        "runner": SUITE_COMMAND,
        "tests": SUITE_MODULES * SUITE_TESTS,
        "ms": _q(walls),
        "note": "pytest is not in the sandbox's Python (the system's); unittest runs the suite",
    }


def _descendants(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            found += [int(child), *_descendants(int(child))]
    return found


def _pss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def _available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _cgroup_usage(names: list[str]) -> int:
    total = 0
    for name in names:
        path = cgroups.ROOT / "memory" / cgroups.PARENT / name / "memory.usage_in_bytes"
        try:
            total += int(path.read_text())
        except (OSError, ValueError):
            continue
    return total


def bench_idle(worker_pid: int, slots: list[str], count: int) -> dict:
    workspace = one_file()
    open_session(workspace, slot=slots[0]).close()  # materialised before the baseline
    time.sleep(1)
    before_available, before_pss = _available(), _pss(_descendants(worker_pid))
    sessions = [open_session(workspace, slot=slots[i % len(slots)]) for i in range(count)]
    time.sleep(2)
    available_drop = before_available - _available()
    pss = _pss(_descendants(worker_pid)) - before_pss
    usage = _cgroup_usage([s.cgroup for s in sessions])
    alive = sum(1 for s in sessions if s.exec("true").status == R.OK)
    closes = []
    for session in sessions:
        started = time.perf_counter()
        session.close()
        closes.append((time.perf_counter() - started) * 1000)
    per_session = max(available_drop, pss) / count
    return {
        "sessions": count,
        "answering": alive,
        "memavailable_drop_per_session_bytes": round(available_drop / count),
        "pss_per_session_bytes": round(pss / count),
        "cgroup_usage_per_session_bytes": round(usage / count),
        "estimated_total_bytes": round(per_session * count),
        "close_ms": _q(closes),
        "note": "MemAvailable is the whole machine's (other programs move it); PSS counts the "
        "sessions' processes only; cgroup usage what was charged after each init joined its cgroup",
    }


# --- the peers ------------------------------------------------------------------------------


def _materialise(workspace: Workspace, root: Path) -> None:
    for path, content in workspace.files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def bwrap_argv(directory: Path) -> list[str]:
    argv = ["bwrap", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib64"):
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{name}"]
    return argv + [
        "--bind",
        str(directory),
        "/workspace",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        "/workspace",
        "--setenv",
        "HOME",
        "/tmp",
    ]


def unshare_argv(_directory: Path) -> list[str]:
    return [
        "unshare",
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount",
        "--mount-proc",
        "--net",
        "--ipc",
        "--uts",
    ]


def _run_peer(argv: list[str], directory: Path, command: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, "bash", "-c", command], cwd=directory, capture_output=True, timeout=120
    )
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]}: {command!r} exited {done.returncode}: {done.stderr[-300:]}")
    return elapsed


def bench_peer(make_argv, sizes: dict, repo: Workspace, work: Path) -> dict:
    """One peer: "open" (a copy of the workspace), exec true, python -c pass, the suite."""
    tool = make_argv(work)[0]
    if shutil.which(tool) is None:
        return {"unavailable": f"{tool} is not installed (apt-get install bubblewrap)"}
    sources = {}
    for label, workspace in (("one_file", one_file()), ("repository", repo)):
        source = work / f"source-{label}"
        _materialise(workspace, source)
        sources[label] = source
    opens = {}
    for label, count in (("one_file", sizes["opens"]), ("repository", sizes["repo_opens"])):
        times = []
        for index in range(count):
            target = work / f"{label}-{index}"
            started = time.perf_counter()
            shutil.copytree(sources[label], target)
            times.append((time.perf_counter() - started) * 1000)
            shutil.rmtree(target)
        opens[label] = _q(times)
    directory = work / "session"
    shutil.copytree(sources["one_file"], directory)
    argv = make_argv(directory)
    try:
        for _ in range(3):
            _run_peer(argv, directory, "true")
        true_ms = [_run_peer(argv, directory, "true") for _ in range(sizes["peer_execs"])]
        python_ms = [
            _run_peer(argv, directory, "python3 -c pass") for _ in range(sizes["peer_pythons"])
        ]
        suite_dir = work / "suite"
        _materialise(suite_repository(), suite_dir)
        suite_argv = make_argv(suite_dir)
        suite_ms = [_run_peer(suite_argv, suite_dir, SUITE_COMMAND) for _ in range(sizes["suites"])]
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return {"unavailable": str(exc)[:500]}
    return {
        "open_copy_ms": opens,
        "exec_true_ms": _q(true_ms),
        "exec_python_ms": _q(python_ms),
        "suite_ms": _q(suite_ms),
        "idle_processes_per_session": 0,
        "idle_bytes_per_session": {
            "one_file": one_file().size_bytes,
            "repository": repo.size_bytes,
        },
    }


def _ratio(peer: dict, key: str, ours: float) -> float | None:
    if "unavailable" in peer or not ours:
        return None
    return round(peer[key]["p50"] / ours, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a few seconds")
    args = parser.parse_args()
    sizes = SIZES["quick" if args.quick else "full"]
    repo = repository(sizes["repo_files"], sizes["repo_bytes"])
    with Stack() as stack:
        stack.redis()
        proc, slots = start_worker()
        try:
            ours = {
                "open_one_file": bench_opens(one_file(), sizes["opens"], slots),
                "open_repository": bench_opens(repo, sizes["repo_opens"], slots),
            }
            with open_session(one_file(), slot=slots[0]) as session:
                ours["exec_true"] = bench_calls(session, "true", sizes["execs"])
                ours["exec_python"] = bench_calls(session, "python3 -c pass", sizes["pythons"])
                ours["enforcement"] = session.enforcement
            ours["suite"] = bench_suite(slots, sizes["suites"])
            ours["idle"] = bench_idle(proc.pid, slots, sizes["idle"])
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    with tempfile.TemporaryDirectory(prefix="sessions-bench-") as tmp:
        peers = {}
        for name, make_argv in (("bwrap", bwrap_argv), ("unshare", unshare_argv)):
            work = Path(tmp) / name
            work.mkdir()
            peers[name] = bench_peer(make_argv, sizes, repo, work)
    true_p50 = ours["exec_true"]["ms"]["p50"]
    ratios = {}
    for name, peer in peers.items():
        ratios[name] = {
            "exec_true": _ratio(peer, "exec_true_ms", true_p50),
            "exec_python": _ratio(peer, "exec_python_ms", ours["exec_python"]["ms"]["p50"]),
            "suite": _ratio(peer, "suite_ms", ours["suite"]["ms"]["p50"]),
        }
        if "unavailable" not in peer:
            ratios[name]["open_one_file"] = round(
                peer["open_copy_ms"]["one_file"]["p50"] / ours["open_one_file"]["open_ms"]["p50"], 2
            )
            ratios[name]["open_repository"] = round(
                peer["open_copy_ms"]["repository"]["p50"]
                / ours["open_repository"]["open_ms"]["p50"],
                2,
            )
    measured = {
        "open_one_file_p50_ms": ours["open_one_file"]["open_ms"]["p50"],
        "open_repository_p50_ms": ours["open_repository"]["open_ms"]["p50"],
        "exec_true_p50_ms": true_p50,
        "per_call_speedup_over_bwrap": ratios["bwrap"]["exec_true"],
        "idle_sessions_total_bytes": round(
            max(
                ours["idle"]["memavailable_drop_per_session_bytes"],
                ours["idle"]["pss_per_session_bytes"],
            )
            * 500
        ),
    }
    targets = {}
    for key, limit in TARGETS.items():
        value = measured[key]
        met = (
            None
            if value is None
            else (value >= limit if key.startswith("per_call") else value <= limit)
        )
        targets[key] = {"target": limit, "measured": value, "met": met}
    targets["idle_sessions_total_bytes"]["note"] = "per-session figure of this run times 500"
    print(
        json.dumps(
            {
                "mode": "quick" if args.quick else "full",
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "sessions": ours,
                "bwrap": peers["bwrap"],
                "unshare": peers["unshare"],
                "ratios": ratios,
                "targets": targets,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
