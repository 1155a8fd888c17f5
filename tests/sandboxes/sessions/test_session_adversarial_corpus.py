"""The adversarial corpus of sessions: hostile sequences of calls, each with the verdict every
call must get, then a check that the host and another session are unharmed.

Sessions hold code an agent writes over many turns, so each case plants something in one
call and tries to use it in a later one, after a close, or in another session. Every case
runs in the same worker slot as a *bystander* session that holds a secret in its
workspace, its ``/tmp`` and its ``/dev/shm``: no output of any case may contain it, and
after each case the bystander must still answer with all three intact. After each case
the host must be as it was: its mounts, a sentinel file outside the sandbox, the system
tree, the workspace's shared lower layer (byte for byte), the worker's cgroups; and
nothing of the case's sessions may remain (processes of their pid namespaces, cgroups).
Between two calls of a session that does not keep its processes, only its init and the
next call's booted child may exist.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.sessions import (
    SessionError,
    SessionLimits,
    Workspace,
    open_session,
)
from tests.sandboxes.conftest import started_session_pool
from tests.sandboxes.sessioncheck import (
    host_mounts,
    pid_namespace,
    processes_in,
    session_gone,
    session_mounts_added,
    wait_until,
)

MIB = 1024**2
HOST_SECRET = "crucible-host-secret-5e1f"
BYSTANDER_SECRET = "bystander-secret-9c2d"
SENTINEL_DIR = Path(settings.VAR_DIR) / "session-corpus-sentinel"
SENTINEL = SENTINEL_DIR / "host-file.txt"
PLANTED = [Path("/usr/lib/crucible-session-pwned"), Path("/etc/crucible-session-pwned")]
ORIGINAL = "def add(a, b):\n    return a + b\n"
WORKSPACE = Workspace.from_files(
    {"solution.py": ORIGINAL, "data.txt": "data\n", "tests/test_add.py": "assert True\n"}
)
HOSTILE = SessionLimits(
    memory_bytes=256 * MIB,
    processes=48,
    workspace_bytes=32 * MIB,
    workspace_inodes=2048,
    tmp_bytes=16 * MIB,
    shm_bytes=8 * MIB,
)
KEEP = SessionLimits(**{**HOSTILE.to_dict(), "keep_processes": True})
LEASED = SessionLimits(**{**HOSTILE.to_dict(), "idle_timeout_s": 1.0})
ANY_FAILURE = (R.FAILED, R.CRASHED, R.TIMEOUT)


@dataclass(frozen=True)
class Exec:
    """``session.exec(command)`` must get ``status``; ``out`` must be in its stdout, ``check``
    must hold for its stdout. ``{bystander_pid}``, ``{digest}``, ``{store}`` and
    ``{sentinel}`` in the command are filled in."""

    command: str
    status: str | tuple[str, ...]
    out: str | None = None
    timeout_s: float = 5.0
    cwd: str = "."
    stdin: str | None = None
    check: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class File:
    """A file operation (``read``, ``write``, ``list``) must fail with ``error`` (a
    :class:`SessionError` kind), or succeed (``None``) with ``out`` in what it returns."""

    op: str
    path: str
    error: str | None
    content: str = ""
    out: str | None = None


@dataclass(frozen=True)
class Reopen:
    """Close the session (nothing of it may remain) and open a new one of the same workspace
    in the same slot; later steps act on the new one."""


@dataclass(frozen=True)
class Close:
    """Close the session: nothing of it may remain."""


@dataclass(frozen=True)
class Abandon:
    """Stop calling it: its lease must close it within ``seconds``, nothing of it may remain,
    and its next call is an ``infra_error`` naming it."""

    seconds: float = 15.0


@dataclass(frozen=True)
class Bystander:
    """Run ``command`` in the bystander session: ``out`` must be in its stdout."""

    command: str
    out: str


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple
    limits: SessionLimits = HOSTILE
    keeps: bool = False  # calls may leave processes running (the session's keep option)
    notes: dict = field(default_factory=dict)


def bomb(body: str) -> str:
    """``python3 -c`` with ``body``, quoted for bash."""
    return "python3 -c " + shlex.quote(body)


FORK_LOOP = (
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
DOUBLE_FORK = (
    "import os, signal, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
    "        signal.signal(s, signal.SIG_IGN)\n"
    "    if os.fork() == 0:\n"
    "        while True:\n"
    "            open('/workspace/solution.py', 'w').write('pwned')\n"
    "            time.sleep(0.05)\n"
    "    os._exit(0)\n"
    "print('planted')\n"
)
LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
PTRACE_INIT = LIBC + "print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"  # PTRACE_ATTACH
ADD_KEY = (  # add_key(2) into the user keyring
    LIBC + "libc.syscall.restype = ctypes.c_long\n"
    "print(libc.syscall(248, b'user', b'mark', b'secret', ctypes.c_long(6), ctypes.c_long(-4)))\n"
)
UNIX_SOCKETS = (
    "import socket\n"
    "for path in ('/var/run/postgresql/.s.PGSQL.5432', {redis!r}):\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect(path)\n"
    "        print('connected', path)\n"
    "    except OSError as exc:\n"
    "        print('refused', type(exc).__name__)\n"
).format(redis=str(Path(settings.VAR_DIR) / "redis.sock"))
MEMORY_BOMB = "x = b'x' * (1 << 30)\nprint(len(x))\n"


CORPUS = [
    # --- processes that try to outlive their call, or the session
    Case(
        "daemon-into-the-next-call",
        (
            Exec("setsid nohup sleep 1000 > /dev/null 2>&1 & echo started", R.OK, out="started"),
            Exec("pgrep sleep || echo none", R.OK, out="none"),
        ),
    ),
    Case(
        "double-fork-daemon-ignoring-signals",
        (
            Exec(bomb(DOUBLE_FORK), R.OK, out="planted"),
            Exec("echo mine > solution.py; sleep 0.3; cat solution.py", R.OK, out="mine"),
        ),
        notes={"then": "the daemon that rewrote solution.py is gone: the next call's write stays"},
    ),
    Case(
        "daemon-tries-to-outlive-close",
        (Exec("setsid sleep 1000 > /dev/null 2>&1 & disown; echo ok", R.OK, out="ok"), Close()),
    ),
    Case(
        "kept-daemon-lives-until-close-only",
        (
            Exec("setsid sleep 1000 > /dev/null 2>&1 &", R.OK),
            # A moment for setsid to exec sleep (a loaded machine lost that race once).
            Exec(
                "for i in $(seq 40); do pgrep sleep > /dev/null && echo kept && break; "
                "sleep 0.05; done",
                R.OK,
                out="kept",
            ),
            Close(),
        ),
        limits=KEEP,
        keeps=True,
    ),
    Case(
        "kept-daemon-rewriting-the-workspace-does-not-reach-the-next-session",
        (
            Exec(bomb(DOUBLE_FORK), R.OK, out="planted"),
            Reopen(),
            Exec("sleep 0.3; cat solution.py", R.OK, out=ORIGINAL),
        ),
        limits=KEEP,
        keeps=True,
    ),
    # --- fork bombs
    Case(
        "bash-fork-bomb",
        (
            Exec(":(){ :|:& };:; sleep 10", R.TIMEOUT, timeout_s=3),
            Exec("echo usable", R.OK, out="usable"),
        ),
    ),
    Case(
        "python-fork-bomb",
        (
            Exec(bomb(FORK_LOOP), ANY_FAILURE, timeout_s=3),
            Exec("echo usable", R.OK, out="usable"),
        ),
    ),
    Case(
        "kept-fork-bomb-is-capped-and-ends-at-close",
        (
            Exec(bomb(FORK_LOOP) + " > /dev/null 2>&1 &", (R.OK, R.CRASHED)),
            Exec("echo maybe", (R.OK, R.CRASHED, R.FAILED, R.TIMEOUT), timeout_s=2),
            Close(),
        ),
        limits=KEEP,
        keeps=True,
    ),
    # --- filling what the session has
    Case(
        "fill-the-workspace",
        (
            Exec("dd if=/dev/zero of=big bs=1M count=100", (R.FAILED, R.CRASHED)),
            Exec("du -sm big | cut -f1", R.OK, check=lambda out: int(out) <= 32),
            Exec("rm big && echo ok > small && cat small", R.OK, out="ok"),
        ),
    ),
    Case(
        "fill-tmp",
        (
            Exec("dd if=/dev/zero of=/tmp/big bs=1M count=100", R.FAILED),
            Exec("rm /tmp/big && echo usable", R.OK, out="usable"),
        ),
    ),
    Case("fill-dev-shm", (Exec("dd if=/dev/zero of=/dev/shm/big bs=1M count=100", R.FAILED),)),
    Case(
        "fill-the-workspace-inodes",
        (
            Exec(
                "for i in $(seq 3000); do : > f$i || { echo full; exit 1; }; done",
                R.FAILED,
                out="full",
            ),
            Exec("rm -f f* && echo usable", R.OK, out="usable"),
        ),
    ),
    Case(
        "memory-bomb",
        (
            Exec(bomb(MEMORY_BOMB), R.MEMORY_LIMIT, timeout_s=10),
            Exec("echo usable", R.OK, out="usable"),
        ),
    ),
    # --- links and paths out of the workspace
    Case(
        "symlink-to-etc-shadow",
        (
            Exec("ln -s /etc/shadow s && cat s", R.FAILED),
            File("read", "s", "outside"),
        ),
    ),
    Case(
        "symlink-to-a-host-file",
        (
            Exec("ln -s {sentinel} s; cat s", R.FAILED),
            File("read", "s", "outside"),
            File("write", "s", "outside", content="pwned"),
        ),
    ),
    Case(
        "symlink-into-proc-root",
        (
            Exec("ln -s /proc/1/root r; ls r/", R.FAILED),
            File("list", "r", "outside"),
            File("read", "r/etc/passwd", "outside"),
        ),
    ),
    Case(
        "symlinked-directory-in-a-write",
        (
            Exec("ln -s /tmp t && echo ok", R.OK, out="ok"),
            File("write", "t/escaped", "outside", content="x"),
            Exec("ls /tmp/escaped", R.FAILED),
        ),
    ),
    Case(
        "hard-links-out",
        (Exec("ln /etc/passwd hl", R.FAILED), Exec("ln /usr/bin/su su2", R.FAILED)),
    ),
    Case(
        "dot-dot-and-absolute-paths",
        (
            File("read", "../../etc/passwd", "outside"),
            File("read", "/etc/passwd", "outside"),
            File("write", "../escape.txt", "outside", content="x"),
            File("list", "..", "outside"),
            File("read", "tests/../../etc/hostname", "outside"),
            File("read", "tests/../solution.py", None, out="return a + b"),
        ),
    ),
    Case("working-directory-escape", (Exec("cat /etc/hostname", R.FAILED, cwd="../.."),)),
    Case(
        "a-fifo-read-does-not-hang",
        (Exec("mkfifo pipe && echo ok", R.OK, out="ok"), File("read", "pipe", "not_a_file")),
    ),
    # --- other sessions
    Case(
        "signal-every-process-it-can",
        (
            Exec("kill -9 -1; echo survived", ANY_FAILURE + (R.OK,)),
            Exec("echo usable", R.OK, out="usable"),
        ),
    ),
    Case(
        "signal-another-session-by-its-host-pid",
        (Exec("kill -9 {bystander_pid} || kill -9 1", R.FAILED),),
    ),
    Case(
        "read-another-sessions-workspace",
        (
            Exec(
                "cat /proc/*/root/workspace/marker.txt; find / -xdev -name marker.txt; "
                "ls -a /.store; grep -rs bystander-secret /tmp /dev/shm /workspace",
                ANY_FAILURE,
            ),
        ),
    ),
    Case(
        "read-the-lower-layers-host-path",
        (
            Exec("ls /.store/{digest} || cat {store}/{digest}/data.txt", R.FAILED),
            Exec("grep -c ' /.store ' /proc/self/mountinfo || true", R.OK, out="0"),
            Exec("ls -A /.store | wc -l", R.OK, out="0"),
        ),
    ),
    Case(
        "write-into-the-lower-layer",
        (
            Exec(
                "echo pwned > data.txt && rm tests/test_add.py && cat data.txt", R.OK, out="pwned"
            ),
            Reopen(),
            Exec("cat data.txt tests/test_add.py", R.OK, out="data\nassert True\n"),
        ),
    ),
    Case(
        "mount-over-or-out",
        (
            Exec("mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", R.FAILED),
            Exec("umount -l /workspace", R.FAILED),
            Exec("mount --bind / /tmp/m", R.FAILED),
        ),
    ),
    Case("nested-user-namespace", (Exec("unshare -Ur id", R.FAILED),)),
    Case("kernel-keyring", (Exec(bomb(ADD_KEY), R.OK, out="-1"),)),
    Case(
        "setuid-binaries-give-nothing",
        (Exec("su -c id root < /dev/null", R.FAILED), Exec("id -u", R.OK, out="65534")),
    ),
    Case(
        "write-the-system-tree",
        (
            Exec(
                "echo x > /usr/lib/crucible-session-pwned; echo x > /etc/crucible-session-pwned",
                R.FAILED,
            ),
        ),
    ),
    # --- state that would leak from a closed session into the next one in the slot
    Case(
        "state-left-for-the-next-session",
        (
            Exec(
                "echo leak > /workspace/leak && echo leak > /tmp/leak && echo leak > /dev/shm/leak"
                " && ipcmk -M 4321 && echo planted",
                R.OK,
                out="planted",
            ),
            Reopen(),
            Exec("cat /workspace/leak /tmp/leak /dev/shm/leak", R.FAILED),
            Exec("ipcs -m | grep -c 4321 || true", R.OK, out="0"),
        ),
    ),
    # --- /proc and /sys
    Case(
        "proc-snooping",
        (
            Exec("ls /proc | grep -cE '^[0-9]+$'", R.OK, check=lambda out: int(out) <= 8),
            Exec("cat /proc/1/environ", R.FAILED),
            Exec("ls /proc/1/fd", R.FAILED),
            Exec("cat /proc/1/maps", R.FAILED),
            Exec("ls /proc/1/root/", R.FAILED),
        ),
    ),
    Case(
        "sys-snooping",
        (
            Exec("ls /sys", R.FAILED),
            Exec("cat /sys/fs/cgroup/memory/memory.limit_in_bytes", R.FAILED),
        ),
    ),
    Case(
        "proc-sys-writes",
        (
            Exec("echo 3 > /proc/sys/vm/drop_caches", R.FAILED),
            Exec("echo b > /proc/sysrq-trigger", R.FAILED),
        ),
    ),
    Case(
        "ptrace-the-sessions-init",
        (Exec(bomb(PTRACE_INIT), R.OK, out="-1 1"), Exec("strace -p 1", R.FAILED)),
    ),
    # --- network
    Case("network-egress", (Exec("curl -sS -m 3 http://1.1.1.1/", R.FAILED),)),
    Case("dns", (Exec("getent hosts example.com", R.FAILED),)),
    Case(
        "host-loopback-services",
        (
            Exec("curl -sS -m 2 http://127.0.0.1:6379/", R.FAILED),
            Exec("curl -sS -m 2 http://127.0.0.1:8000/", R.FAILED),
        ),
    ),
    Case(
        "host-unix-sockets", (Exec(bomb(UNIX_SOCKETS), R.OK, check=lambda o: "connected" not in o),)
    ),
    Case(
        "loopback-is-the-sessions-own",
        (
            Exec(
                "setsid python3 -m http.server 8765 --bind 127.0.0.1 > /dev/null 2>&1 & "
                "for i in $(seq 50); do curl -s -m 1 127.0.0.1:8765 > /dev/null && echo up"
                " && break; sleep 0.1; done",
                R.OK,
                out="up",
            ),
            Bystander(
                "curl -s -m 2 127.0.0.1:8765 > /dev/null && echo reached || echo refused", "refused"
            ),
        ),
        limits=KEEP,
        keeps=True,
    ),
    # --- calls that never return, or flood
    Case(
        "a-call-that-never-returns",
        (Exec("sleep infinity", R.TIMEOUT, timeout_s=1), Exec("echo usable", R.OK, out="usable")),
    ),
    Case(
        "a-busy-loop-ignoring-signals",
        (Exec("trap '' TERM INT HUP; while :; do :; done", R.TIMEOUT, timeout_s=1),),
    ),
    Case(
        "stdin-never-read", (Exec("sleep 0.2; echo done", R.OK, out="done", stdin="x" * (1 << 20)),)
    ),
    Case(
        "endless-stdout",
        (Exec("yes", R.OUTPUT_LIMIT, timeout_s=10, check=lambda out: len(out) == 64 * 1024),),
    ),
    Case("endless-stderr", (Exec("head -c 20000000 /dev/zero >&2", R.OUTPUT_LIMIT, timeout_s=10),)),
    Case(
        "huge-file-read",
        (
            Exec("head -c 20000000 /dev/zero > big && echo ok", R.OK, out="ok"),
            File("read", "big", "too_large"),
        ),
    ),
    Case(
        "forged-result-on-stdout-and-stray-descriptors",
        (
            Exec(
                'echo \'{"exited": true, "status": 0}\'; '
                "for fd in 3 4 5 6 7 8 9; do echo x >&$fd; done; ls /proc/self/fd | wc -l; exit 1",
                R.FAILED,
                check=lambda out: out.strip().splitlines()[-1] == "4",
            ),
        ),
    ),
    # --- a kept process that goes after the next call's shell (same user, same session)
    Case(
        "kept-process-writes-into-the-next-shells-descriptors",
        (
            Exec(
                "setsid bash -c 'while :; do for f in /proc/[0-9]*/fd/[3-9]; do"
                " echo setup:forged > $f; done 2>/dev/null; sleep 0.01; done'"
                " > /dev/null 2>&1 & echo started",
                R.OK,
                out="started",
            ),
            Exec("sleep 0.2; echo done", (R.OK, R.FAILED)),
            Exec("echo again", (R.OK, R.FAILED)),
        ),
        limits=KEEP,
        keeps=True,
        notes={"verdict": "its own calls may fail; never an infra_error"},
    ),
    Case(
        "a-stopped-shell-and-a-command-larger-than-a-pipe",
        (
            Exec(
                "setsid bash -c 'while :; do for p in /proc/[0-9]*; do p=${p#/proc/};"
                " [ $p != 1 ] && [ $p != $$ ] && kill -STOP $p; done 2>/dev/null; sleep 0.01;"
                " done' > /dev/null 2>&1 & echo started",
                R.OK,
                out="started",
            ),
            Exec("true # " + "x" * 90_000, (R.TIMEOUT, R.OK, R.CRASHED), timeout_s=2),
        ),
        limits=KEEP,
        keeps=True,
        notes={"verdict": "the call ends by its own wall clock; never an infra_error"},
    ),
    # --- a session opened and never closed
    Case(
        "opened-and-abandoned",
        (Exec("setsid sleep 1000 > /dev/null 2>&1 & echo ok", R.OK, out="ok"), Abandon()),
        limits=LEASED,
    ),
]


@pytest.fixture(scope="module", autouse=True)
def host_sentinel():
    SENTINEL_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(SENTINEL_DIR, 0o755)
    SENTINEL.write_text(HOST_SECRET)
    os.chmod(SENTINEL, 0o644)
    os.environ["CRUCIBLE_HOST_SECRET"] = HOST_SECRET  # the worker runs in this process
    yield
    os.environ.pop("CRUCIBLE_HOST_SECRET", None)
    SENTINEL.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=["host-python3.11", "debian-python3.13"])
def session_pool(request, tmp_path_factory):
    """This module's session worker, once per runtime: the host's Python, and the Debian
    root's 3.13 (its slots hold their sessions in that root)."""
    prefix = "python3.13@" if request.param == "debian-python3.13" else ""
    with started_session_pool(
        tmp_path_factory.mktemp("session-stores"), f"{prefix}sessions-{time.monotonic_ns()}"
    ) as pool:
        yield pool


@pytest.fixture(scope="module")
def bystander(session_pool):
    workspace = Workspace.from_files({"marker.txt": BYSTANDER_SECRET})
    session = open_session(workspace, runtime=session_pool.runtime)
    planted = session.exec(f"echo -n {BYSTANDER_SECRET} > /tmp/marker && cp /tmp/marker /dev/shm/")
    assert planted.status == R.OK, planted
    yield session
    session.close()


def _worker_cgroups() -> set[str]:
    prefix = f"x-{os.getpid()}-"
    root = cgroups.ROOT / "pids" / cgroups.PARENT
    return {p.name for p in root.glob(prefix + "*")} if cgroups.available() else set()


def _lower_digest(store, digest: str) -> str:
    """A hash of every path, mode and content under the materialised workspace."""
    root = store.path(digest)
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path.relative_to(root)).encode() + oct(path.lstat().st_mode).encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


class Runner:
    """Runs one case's steps against live sessions, recording every session it opened."""

    def __init__(self, case: Case, pool, bystander) -> None:
        self.case, self.pool, self.bystander = case, pool, bystander
        self.opened: list[tuple] = []
        self.session = None
        self.values = {
            "bystander_pid": bystander.pid,
            "digest": WORKSPACE.digest,
            "store": str(pool.worker.store.root),
            "sentinel": str(SENTINEL),
        }

    def open(self):
        session = open_session(
            WORKSPACE, limits=self.case.limits, runtime=self.pool.runtime, slot=self.bystander.slot
        )
        self.opened.append((session, pid_namespace(session.pid)))
        self.session = session

    def close_and_check(self) -> None:
        session, namespace = self.opened[-1]
        session.close()
        assert session_gone(session.pid, namespace, session.cgroup), (
            f"{self.case.name}: something of {session.id} remained after close"
        )

    def run(self, step) -> None:
        name = self.case.name
        if isinstance(step, Exec):
            command = step.command
            for key, value in self.values.items():  # not str.format: commands hold braces
                command = command.replace("{" + key + "}", str(value))
            result = self.session.exec(
                command,
                timeout_s=step.timeout_s,
                cwd=step.cwd,
                stdin=step.stdin,
            )
            statuses = step.status if isinstance(step.status, tuple) else (step.status,)
            shown = f"{result.status} {result.exit_code} {result.detail} {result.stderr[-300:]!r}"
            assert result.status in statuses, f"{name}: {step.command!r} got {shown}"
            assert result.status != R.INFRA_ERROR, f"{name}: the sandbox failed: {shown}"
            seen = result.stdout + result.stderr
            assert BYSTANDER_SECRET not in seen and HOST_SECRET not in seen, (
                f"{name}: a secret leaked"
            )
            if step.out is not None:
                assert step.out in result.stdout, f"{name}: {result.stdout[-500:]!r}"
            if step.check is not None:
                assert step.check(result.stdout), f"{name}: {result.stdout[-500:]!r}"
            if not self.case.keeps:  # between calls: its init and the next call's child only
                namespace = self.opened[-1][1]
                assert wait_until(lambda: len(processes_in(namespace)) <= 2, 5), (
                    f"{name}: processes outlived the call: {processes_in(namespace)}"
                )
        elif isinstance(step, File):
            try:
                if step.op == "read":
                    answer = self.session.read_text(step.path)
                elif step.op == "write":
                    answer = str(self.session.write(step.path, step.content))
                else:
                    answer = str(self.session.list(step.path))
            except SessionError as exc:
                assert step.error is not None, f"{name}: {step} refused: {exc}"
                assert exc.kind == step.error, f"{name}: {step} refused as {exc.kind}: {exc}"
                assert exc.kind != "lost"
            else:
                assert step.error is None, f"{name}: {step} was allowed: {answer[:300]!r}"
                if step.out is not None:
                    assert step.out in answer
        elif isinstance(step, Bystander):
            result = self.bystander.exec(step.command)
            assert step.out in result.stdout, f"{name}: bystander saw {result.stdout!r}"
        elif isinstance(step, (Reopen, Close)):
            self.close_and_check()
            if isinstance(step, Reopen):
                self.open()
            else:
                self.session = None
        elif isinstance(step, Abandon):
            session, namespace = self.opened[-1]
            assert session_gone(session.pid, namespace, session.cgroup, step.seconds), (
                f"{name}: the abandoned session was not reaped by its lease"
            )
            result = session.exec("true")
            assert result.status == R.INFRA_ERROR and session.id in result.detail
            self.session = None


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_session_case_gets_its_verdicts_and_harms_nothing(case, session_pool, bystander):
    store = session_pool.worker.store
    mounts, groups = host_mounts(), _worker_cgroups()
    runner = Runner(case, session_pool, bystander)
    runner.open()
    lower = _lower_digest(store, WORKSPACE.digest)
    try:
        for step in case.steps:
            runner.run(step)
    finally:
        for session, _namespace in runner.opened:
            session.close()
    for session, namespace in runner.opened:
        assert session_gone(session.pid, namespace, session.cgroup), (
            f"{case.name}: something of {session.id} remained"
        )
    # the bystander: alive, its secrets where it left them, its workspace untouched
    seen = bystander.exec("cat marker.txt /tmp/marker /dev/shm/marker")
    assert seen.status == R.OK and seen.stdout == BYSTANDER_SECRET * 3, seen
    assert bystander.diff() == ""
    assert len(processes_in(pid_namespace(bystander.pid))) <= 2
    # the host
    assert SENTINEL.read_text() == HOST_SECRET
    assert [p for p in PLANTED if p.exists()] == []
    assert session_mounts_added(mounts, store.root) == []
    assert wait_until(lambda: _worker_cgroups() == groups, 5), "a cgroup was left behind"
    if store.path(WORKSPACE.digest).exists():
        assert _lower_digest(store, WORKSPACE.digest) == lower, "the lower layer changed"


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 30
    assert len({c.name for c in CORPUS}) == len(CORPUS)
