"""Sandbox sessions against bubblewrap (per call and persistent) and unshare, side by side.

Crucible: a ``sandbox_worker --concurrency 0 --session-slots 2`` process (sessions only),
driven through the client API over Redis, as a rollout drives it (``sandboxes/sessions/``).
Peers, each a "session" of its own over a hard-link copy of the workspace (``cp -al``, the
cheapest copy a team would make; a hard link shares the file with the source, so a write in
place would reach it: the copy isolates less than a session's overlay does):

  * ``bwrap``: Debian's bubblewrap started per call (``--ro-bind`` of the system, ``--bind`` of
    the copy on ``/workspace``, ``--unshare-all``, ``--die-with-parent``, ``--new-session``),
    running ``bash -c CMD``;
  * ``bwrap_persistent``: one such ``bwrap`` per session that stays up (a small server in it,
    the system's ``python3``, reads length-prefixed commands on its stdin and runs each as
    ``bash -c CMD``, its output captured, on a pipe back): how a team builds an agent sandbox
    on bubblewrap. Its open is the copy, the ``bwrap`` start and the server's "ready";
  * ``unshare``: util-linux ``unshare`` started per call (user, pid, mount, network, ipc and
    uts namespaces; it sees the host's whole file system), running ``bash -c CMD``.

Every figure is taken in ``rounds`` rounds; within a round each side runs its share of the
work, in an order that alternates between rounds (``benchmarks.common.alternating``), so all
sides see the same load on this shared machine. A side's figure is the spread
(``benchmarks.common.spread``: median, min, max over the rounds) of its per-round medians, in
milliseconds; ``all`` is p50/p99 over every sample. Each side is warmed up first.

  * open: a session's open (and close) of a one-file workspace and of a repository of
    ``repo_files`` files and ``repo_bytes`` bytes (Crucible's first open of each is reported
    apart: it uploads the blob and materialises the workspace once for the worker);
  * calls: ``true`` and ``python3 -c pass`` in a session of each workspace, and a small
    project's 100-test suite (``python3 -m unittest``: pytest is not in the sandbox's Python,
    the system's), two ways: *interleaved* (one call of each side in turn, so each side's
    calls are a few milliseconds apart, as an agent's are, further still) and *back to back*
    (a block of calls in a row per side). For Crucible also the part its worker's host spent
    (the result's ``wall_ms``: the call sent to the session to its answer);
  * ``profile``: where Crucible's milliseconds go per call, back to back: the command timed
    by the shell itself (``$EPOCHREALTIME`` before and after it), the host's part around it,
    the client and Redis around that, the same command in the persistent peer, and a Redis
    ``PING`` as the floor of one round trip;
  * idle memory per open session with ``idle`` sessions open: the machine's ``MemAvailable``
    drop, the sessions' processes' PSS and their cgroups' usage, each divided by the count;
    for ``bwrap_persistent``, the PSS of its processes over a few sessions.

Prints JSON: figures in milliseconds or bytes, ``peers`` (each peer's version and settings),
``ratios`` (a peer's median over Crucible's; above 1: Crucible is faster; ``strongest``: the
lowest over the peers) and ``targets`` (issues 17's and 32's: the measured value and whether it
was met).

Run: ``.venv/bin/python benchmarks/sandbox_sessions.py``; ``--quick`` (small sizes: seconds) is
what CI runs (tests/benchmarks/test_quick.py, which checks the figures above are there).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from sandboxes import cgroups
from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.process import SANDBOX_ENV
from sandboxes.sessions import Session, Workspace, open_session

# Each size's option and full value (the README's figures), and its --quick value. A count is
# the total over the rounds (each round runs its share).
SIZES = {
    "rounds": (3, 3),
    "opens": (150, 6),
    "repo_opens": (60, 3),
    "execs": (240, 6),
    "pythons": (60, 3),
    "suites": (9, 3),
    "profile_calls": (60, 6),
    "idle": (500, 10),
    "idle_peers": (20, 3),
    "repo_files": (1000, 100),
    "repo_bytes": (20 * 1024**2, 2 * 1024**2),
}
TARGETS = {  # a ceiling in milliseconds or bytes, or (a speedup) a floor
    # issue 17's
    "open_one_file_p50_ms": 10.0,
    "open_repository_p50_ms": 25.0,
    "exec_true_p50_ms": 5.0,  # back to back
    "exec_true_interleaved_p50_ms": 5.0,
    "per_call_speedup_over_bwrap_interleaved": 3.0,
    "per_call_speedup_over_bwrap_back_to_back": 3.0,
    "idle_sessions_total_bytes": 2 * 1024**3,
    # issue 32's: against the strongest peer, and the open
    "speedup_over_strongest_python_back_to_back": 2.0,
    "speedup_over_strongest_suite_back_to_back": 2.0,
    "open_one_file_at_most_5ms": 5.0,
    "open_repository_at_most_5ms": 5.0,
}
SUITE_MODULES = 10
SUITE_TESTS = 10
SUITE_COMMAND = "python3 -m unittest discover -q -s tests -t ."
PYTHON_COMMAND = "python3 -c pass"
# (label, workspace label, command, size option) of each call figure
CALLS = (
    ("true", "one_file", "true", "execs"),
    ("python", "one_file", PYTHON_COMMAND, "pythons"),
    ("true_repository", "repository", "true", "execs"),
    ("python_repository", "repository", PYTHON_COMMAND, "pythons"),
    ("suite", "suite", SUITE_COMMAND, "suites"),
)
WAYS = ("interleaved", "back_to_back")


def _q(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
        "n": len(ordered),
    }


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _figure(rounds: list[list[float]]) -> dict:
    """A side's figure: the spread of its per-round medians, and p50/p99 over every sample."""
    return {
        **common.spread([statistics.median(values) for values in rounds], 3),
        "all": _q([value for values in rounds for value in values]),
    }


def _share(total: int, rounds: int) -> int:
    return max(1, total // rounds)


# --- workspaces ----------------------------------------------------------------------------


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
    files = {"calc/__init__.py": "", "tests/__init__.py": ""}
    fib = (
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
        "    return a\n"
    )
    for m in range(SUITE_MODULES):
        files[f"calc/mod{m}.py"] = f"def scale(x):\n    return x * {m + 1}\n\n" + fib
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
    return Workspace.from_files(files)


def _materialise(workspace: Workspace, root: Path) -> None:
    for path, content in workspace.files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def _check(side: str, command: str, status: int, stderr: bytes | str) -> None:
    text = stderr if isinstance(stderr, str) else stderr.decode("utf-8", "replace")
    if status != 0 or ("unittest" in command and "OK" not in text):
        sys.exit(f"{side}: {command!r} exited {status}: {text[-500:]}")


# --- the sides ------------------------------------------------------------------------------


def bwrap_argv(directory: Path) -> list[str]:
    argv = ["bwrap", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib64"):
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{name}"]
    return argv + [
        *("--bind", str(directory), "/workspace", "--proc", "/proc", "--dev", "/dev"),
        *("--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session"),
        *("--chdir", "/workspace", "--setenv", "HOME", "/tmp"),
    ]


def unshare_argv(_directory: Path) -> list[str]:
    return [
        *("unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"),
        *("--mount", "--mount-proc", "--net", "--ipc", "--uts"),
    ]


# The peers' environment: the one Crucible's sessions start with (so ``python3`` is the system's
# there too, not a shim the benchmark's own PATH may name), and a home.
PEER_ENV = {**SANDBOX_ENV, "HOME": "/tmp"}

# The persistent peer's server, run by the system's python3 inside bwrap: one command per
# frame (a 4-byte length, the command), answered with its exit status, stdout and stderr.
SERVER = """
import struct, subprocess, sys
reader, writer = sys.stdin.buffer, sys.stdout.buffer
writer.write(b"R"); writer.flush()
while True:
    head = reader.read(4)
    if len(head) < 4:
        break
    command = reader.read(struct.unpack("!I", head)[0]).decode()
    done = subprocess.run(["bash", "-c", command], stdin=subprocess.DEVNULL, capture_output=True)
    writer.write(struct.pack("!iII", done.returncode, len(done.stdout), len(done.stderr))
                 + done.stdout + done.stderr)
    writer.flush()
"""


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError as exc:
        return f"unavailable: {exc}"
    return (done.stdout or done.stderr).strip().splitlines()[0]


class Crucible:
    """Crucible's sessions, through the client API (the benchmark's own worker's slots)."""

    name = "crucible"
    reason = ""

    def __init__(self, slots: list[str]) -> None:
        self.slots, self.opened = slots, 0
        self.workspaces: dict[str, Workspace] = {}
        self.host_ms: list[float] = []  # the worker host's part of each call since the last read

    def prepare(self, label: str, workspace: Workspace) -> None:
        self.workspaces[label] = workspace

    def open(self, label: str) -> tuple[Session, float]:
        started = time.perf_counter()
        session = open_session(self.workspaces[label], slot=self.slots[self.opened % 2])
        elapsed = _ms(started)
        self.opened += 1
        return session, elapsed

    def call(self, session: Session, command: str) -> float:
        started = time.perf_counter()
        result = session.exec(command, timeout_s=120)
        elapsed = _ms(started)
        _check(self.name, command, 0 if result.status == R.OK else 1, result.stderr)
        self.host_ms.append(result.wall_ms)
        return elapsed

    def output(self, session: Session, command: str) -> str:
        result = session.exec(command, timeout_s=120)
        _check(self.name, command, 0 if result.status == R.OK else 1, result.stderr)
        self.host_ms.append(result.wall_ms)
        return result.stdout

    def close(self, session: Session) -> float:
        started = time.perf_counter()
        session.close()
        return _ms(started)


class PerCall:
    """A peer started per call (``bwrap`` or ``unshare``) over the session's ``cp -al`` copy."""

    def __init__(self, name: str, make_argv, work: Path, version: str) -> None:
        self.name, self.make_argv, self.work, self.version = name, make_argv, work, version
        tool = make_argv(work)[0]
        self.reason = "" if shutil.which(tool) else f"{tool} is not installed"
        self.sources: dict[str, Path] = {}
        self.copies = 0

    def prepare(self, label: str, workspace: Workspace) -> None:
        """Write the workspace once as a host directory: each open hard-links a copy of it."""
        self.sources[label] = self.work / f"source-{label}"
        if not self.sources[label].exists():
            _materialise(workspace, self.sources[label])

    def _copy(self, label: str) -> Path:
        target = self.work / f"copy-{self.copies}"
        self.copies += 1
        subprocess.run(["cp", "-al", str(self.sources[label]), str(target)], check=True)
        return target

    def open(self, label: str) -> tuple[Path, float]:
        started = time.perf_counter()
        target = self._copy(label)
        return target, _ms(started)

    def _run(self, directory: Path, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.make_argv(directory), "bash", "-c", command],
            cwd=directory,
            env=PEER_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )

    def call(self, directory: Path, command: str) -> float:
        started = time.perf_counter()
        done = self._run(directory, command)
        elapsed = _ms(started)
        _check(self.name, command, done.returncode, done.stderr)
        return elapsed

    def output(self, directory: Path, command: str) -> str:
        done = self._run(directory, command)
        _check(self.name, command, done.returncode, done.stderr)
        return done.stdout.decode()

    def close(self, directory: Path) -> float:
        started = time.perf_counter()
        shutil.rmtree(directory)
        return _ms(started)


class Persistent(PerCall):
    """One ``bwrap`` per session that stays up, running each call's ``bash -c`` (``SERVER``)."""

    def open(self, label: str) -> tuple[tuple[subprocess.Popen, Path], float]:
        started = time.perf_counter()
        target = self._copy(label)
        proc = subprocess.Popen(
            [*bwrap_argv(target), "python3", "-c", SERVER],
            env=PEER_ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        if proc.stdout.read(1) != b"R":
            sys.exit(f"{self.name}: the server in bwrap did not start")
        return (proc, target), _ms(started)

    def _ask(self, handle, command: str) -> tuple[int, bytes, bytes]:
        proc = handle[0]
        data = command.encode()
        proc.stdin.write(struct.pack("!I", len(data)) + data)
        proc.stdin.flush()
        status, out, err = struct.unpack("!iII", proc.stdout.read(12))
        return status, proc.stdout.read(out), proc.stdout.read(err)

    def call(self, handle, command: str) -> float:
        started = time.perf_counter()
        status, _out, err = self._ask(handle, command)
        elapsed = _ms(started)
        _check(self.name, command, status, err)
        return elapsed

    def output(self, handle, command: str) -> str:
        status, out, err = self._ask(handle, command)
        _check(self.name, command, status, err)
        return out.decode()

    def close(self, handle) -> float:
        proc, target = handle
        started = time.perf_counter()
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        shutil.rmtree(target)
        return _ms(started)


# --- measurements ---------------------------------------------------------------------------


def bench_opens(label: str, workspace: Workspace, count: int, rounds: int, sides) -> dict:
    """Each side's open and close, ``count`` of each over ``rounds`` rounds (a block per side
    per round, in alternating order); the page cache a side dirtied is written out (``sync``)
    before the next block. Crucible's first open is reported apart."""
    crucible = sides[0]
    for side in sides:
        side.prepare(label, workspace)
    started = time.perf_counter()
    first, _ = crucible.open(label)
    first_ms = _ms(started)
    crucible.close(first)
    for side in sides[1:]:  # warm-up
        side.close(side.open(label)[0])
    os.sync()
    opens = {side.name: [] for side in sides}
    closes = {side.name: [] for side in sides}
    for index in range(rounds):
        for side in common.alternating(index, sides):
            times, ends = [], []
            for _ in range(_share(count, rounds)):
                handle, elapsed = side.open(label)
                times.append(elapsed)
                ends.append(side.close(handle))
            opens[side.name].append(times)
            closes[side.name].append(ends)
            os.sync()
    return {
        side.name: {
            "open_ms": _figure(opens[side.name]),
            "close_ms": _figure(closes[side.name]),
            **(
                {
                    "first_open_ms": round(first_ms, 3),
                    "workspace_files": sum(1 for e in workspace.entries if e.kind == "file"),
                    "workspace_bytes": workspace.size_bytes,
                }
                if side is crucible
                else {}
            ),
        }
        for side in sides
    }


def bench_calls(handles: dict, sides, command: str, count: int, rounds: int) -> dict:
    """One command, per call, interleaved and back to back (see the module), ``count`` calls
    of each side each way over ``rounds`` rounds."""
    crucible = sides[0]
    for side in sides:  # warm-up
        for _ in range(2):
            side.call(handles[side.name], command)
    runs = {way: {side.name: [] for side in sides} for way in WAYS}
    host = {way: [] for way in WAYS}
    share = _share(count, rounds)
    for index in range(rounds):
        done = {side.name: [] for side in sides}
        crucible.host_ms = []
        for call in range(share):
            for side in common.alternating(index + call, sides):
                done[side.name].append(side.call(handles[side.name], command))
        for name, values in done.items():
            runs["interleaved"][name].append(values)
        host["interleaved"].append(crucible.host_ms)
        crucible.host_ms = []
        for side in common.alternating(index, sides):
            runs["back_to_back"][side.name].append(
                [side.call(handles[side.name], command) for _ in range(share)]
            )
        host["back_to_back"].append(crucible.host_ms)
    return {
        way: {
            name: (
                {"ms": _figure(values), "worker_host_ms": _figure(host[way])}
                if name == crucible.name
                else _figure(values)
            )
            for name, values in runs[way].items()
        }
        for way in WAYS
    }


# The command timed by the shell that runs it: its start and end on the machine's clock.
TIMED = 's=$EPOCHREALTIME; {command} >/dev/null; e=$EPOCHREALTIME; echo "$s $e"'


def bench_profile(handles: dict, sides, count: int, rounds: int) -> dict:
    """Where Crucible's milliseconds go per ``python3 -c pass`` call, back to back, against the
    persistent peer's (see the module); the medians over ``count`` calls of each."""
    crucible = next(side for side in sides if side.name == "crucible")
    peer = next((side for side in sides if side.name == "bwrap_persistent"), None)
    command = TIMED.format(command=PYTHON_COMMAND)
    redis = Q.connection()
    rows: dict[str, dict[str, list[float]]] = {}
    share = _share(count, rounds)
    for index in range(rounds):
        for side in common.alternating(index, [s for s in (crucible, peer) if s is not None]):
            row = rows.setdefault(side.name, {})
            for _ in range(share):
                crucible.host_ms = []
                sent = time.time()
                text = side.output(handles[side.name], command)
                answered = time.time()
                begun, ended = (float(word) for word in text.split())
                for key, value in (
                    ("total_ms", (answered - sent) * 1000),
                    ("before_command_ms", (begun - sent) * 1000),
                    ("command_ms", (ended - begun) * 1000),
                    ("after_command_ms", (answered - ended) * 1000),
                ):
                    row.setdefault(key, []).append(value)
                if side is crucible:  # the worker host's part: the call sent to its answer
                    host = crucible.host_ms[-1]
                    row.setdefault("worker_host_ms", []).append(host)
                    row.setdefault("host_around_command_ms", []).append(
                        host - (ended - begun) * 1000
                    )
                    row.setdefault("client_and_redis_ms", []).append(
                        (answered - sent) * 1000 - host
                    )
        pings = []
        for _ in range(share):
            started = time.perf_counter()
            redis.ping()
            pings.append(_ms(started))
        rows.setdefault("redis", {}).setdefault("ping_ms", []).extend(pings)
    return {
        name: {key: round(statistics.median(values), 3) for key, values in row.items()}
        for name, row in rows.items()
    }


def _available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _cgroup_usage(names: list[str]) -> int:
    """The memory charged to the sessions' cgroups, in bytes: each is under Crucible's parent
    cgroup, or inside its worker's budget cgroup there (``w-*``)."""
    total = 0
    parent = cgroups.ROOT / "memory" / cgroups.PARENT
    for name in names:
        for where in [parent / name, *parent.glob(f"*/{name}")]:
            try:
                total += int((where / "memory.usage_in_bytes").read_text())
                break
            except (OSError, ValueError):
                continue
    return total


def bench_idle(worker_pid: int, slots: list[str], count: int) -> dict:
    workspace = one_file()
    open_session(workspace, slot=slots[0]).close()  # materialised before the baseline
    time.sleep(1)
    before_available, before_pss = _available(), common.pss(common.descendants(worker_pid))
    sessions = [open_session(workspace, slot=slots[i % len(slots)]) for i in range(count)]
    time.sleep(2)
    available_drop = before_available - _available()
    held = common.pss(common.descendants(worker_pid)) - before_pss
    usage = _cgroup_usage([s.cgroup for s in sessions])
    alive = sum(1 for s in sessions if s.exec("true").status == R.OK)
    closes = []
    for session in sessions:
        started = time.perf_counter()
        session.close()
        closes.append(_ms(started))
    return {
        "sessions": count,
        "answering": alive,
        "memavailable_drop_per_session_bytes": round(available_drop / count),
        "pss_per_session_bytes": round(held / count),
        "cgroup_usage_per_session_bytes": round(usage / count),
        "close_ms": _q(closes),
        "note": "MemAvailable is the whole machine's (other programs move it); PSS counts the "
        "sessions' processes only; cgroup usage what was charged after each init joined its cgroup",
    }


def bench_idle_persistent(peer: Persistent, count: int) -> dict:
    """The PSS of ``count`` idle persistent-bwrap sessions' processes, per session."""
    handles = [peer.open("one_file")[0] for _ in range(count)]
    time.sleep(1)
    pids = [pid for proc, _ in handles for pid in (proc.pid, *common.descendants(proc.pid))]
    held = common.pss(pids)
    for handle in handles:
        peer.close(handle)
    return {
        "sessions": count,
        "processes_per_session": round(len(pids) / count, 2),
        "pss_per_session_bytes": round(held / count),
    }


def _ratio(peer: float | None, ours: float) -> float | None:
    return round(peer / ours, 2) if peer and ours else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, (full, _quick) in SIZES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=full)
    args = common.parse_args(parser, {name: quick for name, (_full, quick) in SIZES.items()})
    if args.rounds < 3:
        parser.error("--rounds must be at least 3")
    with common.private_var_dir(migrate=False):
        report = measure(args)
    print(json.dumps(report, indent=2))


def peer_settings(tmp: Path) -> dict:
    bwrap = _version(["bwrap", "--version"])
    unshare = _version(["unshare", "--version"])
    argv = " ".join(bwrap_argv(Path("COPY")))
    return {
        "environment": PEER_ENV,
        "bwrap": {
            "version": bwrap,
            "settings": f"per call: {argv} bash -c CMD (cwd: the copy)",
        },
        "bwrap_persistent": {
            "version": bwrap,
            "settings": f"per session: {argv} python3 -c SERVER; per call: the server runs "
            "bash -c CMD (subprocess.run, output captured) and answers on its stdout pipe; "
            "nothing a call leaves running is killed",
            "server": SERVER.strip(),
        },
        "unshare": {
            "version": unshare,
            "settings": " ".join(unshare_argv(tmp)) + " bash -c CMD (cwd: the copy; the "
            "host's whole file system is visible)",
        },
        "open": "cp -al SOURCE COPY (a hard-link copy: files shared with the source); close: "
        "rm -r of the copy (and, persistent, EOF to the server and its exit)",
    }


def measure(args) -> dict:
    sizes = {name: getattr(args, name) for name in SIZES}
    rounds = sizes["rounds"]
    workspaces = {
        "one_file": one_file(),
        "repository": repository(sizes["repo_files"], sizes["repo_bytes"]),
        "suite": suite_repository(),
    }
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="sessions-bench-") as tmp, Stack() as stack:
        settings = peer_settings(Path(tmp))
        candidates = []
        for name, kind, make_argv in (
            ("bwrap", PerCall, bwrap_argv),
            ("bwrap_persistent", Persistent, bwrap_argv),
            ("unshare", PerCall, unshare_argv),
        ):
            (Path(tmp) / name).mkdir()
            candidates.append(kind(name, make_argv, Path(tmp) / name, settings[name]["version"]))
        peers = [peer for peer in candidates if not peer.reason]
        # 500 idle sessions of the default limits may write 219 GiB between them (their tmpfs
        # sizes): the worker's disk quota (CRUCIBLE_SESSION_DISK_BUDGET, reserved per open)
        # is set to fit them, since what is measured is what idle sessions cost.
        proc, slots = common.own_session_worker(
            stack, env={"CRUCIBLE_SESSION_DISK_BUDGET": str(1 << 40)}
        )
        crucible = Crucible(slots)
        sides = [crucible, *peers]
        try:
            opens = {
                "one_file": bench_opens(
                    "one_file", workspaces["one_file"], sizes["opens"], rounds, sides
                ),
                "repository": bench_opens(
                    "repository", workspaces["repository"], sizes["repo_opens"], rounds, sides
                ),
            }
            calls, profile = {}, {}
            for label in ("one_file", "repository", "suite"):
                for side in sides:
                    side.prepare(label, workspaces[label])
                handles = {side.name: side.open(label)[0] for side in sides}
                try:
                    for key, where, command, size in CALLS:
                        if where == label:
                            calls[key] = bench_calls(handles, sides, command, sizes[size], rounds)
                    if label == "one_file":
                        enforcement = handles["crucible"].enforcement
                        profile = bench_profile(handles, sides, sizes["profile_calls"], rounds)
                finally:
                    for side in sides:
                        side.close(handles[side.name])
            idle = bench_idle(proc.pid, slots, sizes["idle"])
            persistent = next((p for p in peers if isinstance(p, Persistent)), None)
            idle_peer = bench_idle_persistent(persistent, sizes["idle_peers"]) if persistent else {}
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    ours = {
        "open_one_file": opens["one_file"]["crucible"],
        "open_repository": opens["repository"]["crucible"],
        **{f"exec_{key}": {way: calls[key][way]["crucible"] for way in WAYS} for key, *_ in CALLS},
        "suite_runner": {
            "command": SUITE_COMMAND,
            "tests": SUITE_MODULES * SUITE_TESTS,
            "note": "pytest is not in the sandbox's Python (the system's); unittest runs it",
        },
        "idle": idle,
        "enforcement": enforcement,
    }
    report = {
        "quick": args.quick,
        "sizes": sizes,
        "cpus": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "peers": settings,
        "sessions": ours,
    }
    ratios: dict = {}
    for peer in candidates:
        name = peer.name
        if peer.reason:
            report[name], ratios[name] = {"unavailable": peer.reason}, {}
            continue
        report[name] = {
            "open_ms": {label: opens[label][name]["open_ms"] for label in opens},
            "close_ms": {label: opens[label][name]["close_ms"] for label in opens},
            **{f"exec_{key}": {way: calls[key][way][name] for way in WAYS} for key, *_ in CALLS},
        }
        if isinstance(peer, Persistent):
            report[name]["idle"] = idle_peer
        ratios[name] = {
            f"{key}_{way}": _ratio(
                calls[key][way][name]["median"], calls[key][way]["crucible"]["ms"]["median"]
            )
            for key, *_ in CALLS
            for way in WAYS
        }
        for label in opens:
            ratios[name][f"open_{label}"] = _ratio(
                opens[label][name]["open_ms"]["median"],
                opens[label]["crucible"]["open_ms"]["median"],
            )
    available = [ratios[peer.name] for peer in peers]
    ratios["strongest"] = {
        key: min((r[key] for r in available if r.get(key) is not None), default=None)
        for key in (available[0] if available else {})
    }
    report["ratios"] = ratios
    report["profile"] = profile
    report["targets"] = targets(ours, ratios, idle)
    return report


def targets(ours: dict, ratios: dict, idle: dict) -> dict:
    bwrap, strongest = ratios.get("bwrap", {}), ratios["strongest"]
    measured = {
        "open_one_file_p50_ms": ours["open_one_file"]["open_ms"]["median"],
        "open_repository_p50_ms": ours["open_repository"]["open_ms"]["median"],
        "exec_true_p50_ms": ours["exec_true"]["back_to_back"]["ms"]["median"],
        "exec_true_interleaved_p50_ms": ours["exec_true"]["interleaved"]["ms"]["median"],
        "per_call_speedup_over_bwrap_interleaved": bwrap.get("true_interleaved"),
        "per_call_speedup_over_bwrap_back_to_back": bwrap.get("true_back_to_back"),
        "idle_sessions_total_bytes": round(
            max(idle["memavailable_drop_per_session_bytes"], idle["pss_per_session_bytes"]) * 500
        ),
        "speedup_over_strongest_python_back_to_back": strongest.get("python_back_to_back"),
        "speedup_over_strongest_suite_back_to_back": strongest.get("suite_back_to_back"),
        "open_one_file_at_most_5ms": ours["open_one_file"]["open_ms"]["median"],
        "open_repository_at_most_5ms": ours["open_repository"]["open_ms"]["median"],
    }
    found = {}
    for key, value in measured.items():
        limit, met = TARGETS[key], None
        if value is not None:
            met = value >= limit if "speedup" in key else value <= limit
        found[key] = {"target": limit, "measured": value, "met": met}
    found["idle_sessions_total_bytes"]["note"] = "this run's per-session figure times 500"
    return found


if __name__ == "__main__":
    main()
