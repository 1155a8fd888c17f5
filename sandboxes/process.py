"""Spawn one isolated process tree, enforce its limits, and collect what it did.

Isolation (Linux, as root or not) uses the kernel's namespaces through util-linux's
``unshare``: a new user namespace (mapped root inside, so nothing needs real
privileges), network (only a downed loopback), pid (with a private ``/proc``),
mount, ipc and uts namespaces. The child of ``unshare --fork`` is pid 1 of the new
pid namespace, so when it exits or is killed the kernel kills every process left in
the namespace: a daemonised grandchild cannot outlive its execution.

Memory and process count are limited per execution tree by a cgroup where the host
allows it (``cgroups.py``: v1 ``memory`` and ``pids``, as root), and otherwise by
rlimits (address space, and process count of the sandbox user). CPU seconds, file
size and open files are always rlimits set before exec. Wall-clock time and output
size are enforced from the host by SIGKILL. ``ProcessOutcome.enforcement`` says
whether a cgroup or rlimits alone held the tree.
When the host runs as root, the tree first drops to the ``nobody`` user, so the
sandbox cannot read the host's files that are private to root.

Deeper hardening (read-only root, cgroups, resident workers) is issue 3.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sandboxes import cgroups

NOBODY = 65534
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution.

    Attributes:
        wall_timeout_s: seconds of wall-clock time before the tree is killed.
        cpu_s: CPU seconds (RLIMIT_CPU); the kernel sends SIGXCPU, then SIGKILL.
        memory_bytes: address space of each process (RLIMIT_AS).
        output_cap_bytes: bytes of stdout and of stderr kept; more is drained and
            counted, and past ``output_kill_bytes`` the tree is killed.
        file_size_bytes: the largest file the tree may write (RLIMIT_FSIZE).
        processes: processes of the sandbox user (RLIMIT_NPROC), enforced when the
            sandbox drops to its own user.
    """

    wall_timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 2 * 1024**3
    output_cap_bytes: int = 64 * 1024
    output_kill_bytes: int = 8 * 1024**2
    file_size_bytes: int = 16 * 1024**2
    processes: int = 512


@dataclass
class ProcessOutcome:
    """Raw facts about a finished process tree, before any grading."""

    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    results: bytes
    truncated: bool
    timed_out: bool
    output_exceeded: bool
    wall_ms: float
    cpu_ms: float
    peak_memory_bytes: int
    enforcement: str = "rlimit"  # "cgroup-v1" when a cgroup held memory and pids
    memory_limit_hit: bool = False
    pids_limit_hit: bool = False


class _Drain(threading.Thread):
    """Read a pipe to its end, keeping the first ``cap`` bytes and counting the rest."""

    def __init__(self, fd: int, cap: int, on_excess) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap, self.on_excess = fd, cap, on_excess
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                self.total += len(chunk)
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.on_excess(self.total)
        finally:
            os.close(self.fd)


def _drop_privileges_and_limit(limits: Limits, as_root: bool, cgroup: cgroups.Cgroup | None):
    join_files = cgroup.join_files() if cgroup else []
    # With a cgroup capping resident memory, the address-space rlimit only stops
    # absurd reservations; without one it is the memory limit.
    address_space = limits.memory_bytes * 4 if cgroup else limits.memory_bytes

    def preexec() -> None:
        os.setsid()
        for path in join_files:  # join while still root: "0" means this process
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, b"0")
            os.close(fd)
        if as_root:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return preexec


def make_workspace(files: dict[str, str]) -> Path:
    """Create a fresh temporary directory holding ``files`` (relative path -> text).

    Raises:
        ValueError: a path is absolute or climbs out of the workspace.
    """
    root = Path(tempfile.mkdtemp(prefix=f"crucible-ws-{os.getpid()}-"))
    for rel, text in files.items():
        target = (root / rel).resolve()
        if root.resolve() not in target.parents:
            shutil.rmtree(root, ignore_errors=True)
            raise ValueError(f"workspace file {rel!r} is outside the workspace; use a relative path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
    return root


def run_tree(
    argv: list[str], *, cwd: Path, stdin_for, limits: Limits, pass_fds: tuple[int, ...] = ()
) -> ProcessOutcome:
    """Run ``argv`` isolated in ``cwd`` and return what it did.

    ``stdin_for(results_fd)`` returns the bytes written to its standard input; it is
    told the number of the inherited pipe whose content comes back as
    ``ProcessOutcome.results`` (capped at 4 MiB). ``pass_fds`` are further
    descriptors the tree inherits; this function closes them in the host once the
    tree holds them, so each end of a pipe lives in exactly one tree.

    Raises:
        OSError: the process could not be started (the caller reports ``infra_error``).
    """
    as_root = os.geteuid() == 0
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    in_r, in_w = os.pipe()
    exceeded = threading.Event()
    proc_holder: dict = {}

    def on_excess(total: int) -> None:
        if total > limits.output_kill_bytes and not exceeded.is_set():
            exceeded.set()
            _kill_group(proc_holder.get("pid"))

    cgroup = cgroups.create(memory_bytes=limits.memory_bytes, processes=limits.processes)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            [*UNSHARE, *argv],
            cwd=cwd,
            stdin=in_r,
            stdout=out_w,
            stderr=err_w,
            env={**SANDBOX_ENV, "HOME": str(cwd)},
            preexec_fn=_drop_privileges_and_limit(limits, as_root, cgroup),
            pass_fds=(res_w, *pass_fds),
            close_fds=True,
        )
    except BaseException:
        if cgroup:
            cgroup.remove()
        raise
    finally:
        for fd in (out_w, err_w, res_w, in_r, *pass_fds):
            os.close(fd)
    proc_holder["pid"] = proc.pid
    drains = [
        _Drain(out_r, limits.output_cap_bytes, on_excess),
        _Drain(err_r, limits.output_cap_bytes, on_excess),
        _Drain(res_r, 4 * 1024**2, lambda _total: None),
    ]
    for drain in drains:
        drain.start()
    # Write stdin from a thread: a child that never reads must not block the host.
    threading.Thread(target=_feed, args=(in_w, stdin_for(res_w)), daemon=True).start()

    waited: dict = {}

    def reap() -> None:
        waited["status"] = os.wait4(proc.pid, 0)

    reaper = threading.Thread(target=reap, daemon=True)
    reaper.start()
    reaper.join(limits.wall_timeout_s)
    timed_out = reaper.is_alive()
    if timed_out:
        _kill_group(proc.pid)
        reaper.join()
    wall_ms = (time.monotonic() - start) * 1000
    # The pid namespace is gone with its init; kill the group anyway for anything
    # the unshare process itself left, then let the pipes close.
    _kill_group(proc.pid)
    for drain in drains:
        drain.join(5)
    proc.returncode = 0  # reaped by wait4 above; stop Popen from waiting again

    peak_memory = 0
    memory_hit = pids_hit = False
    if cgroup:
        peak_memory = cgroup.peak_memory_bytes()
        memory_hit, pids_hit = cgroup.memory_limit_hit(), cgroup.pids_limit_hit()
        cgroup.remove()
    _pid, status, usage = waited["status"]
    exit_code = os.waitstatus_to_exitcode(status)
    signum = -exit_code if exit_code < 0 else None
    # unshare --fork re-raises the child's fatal signal or reports 128+signal.
    if signum is None and exit_code > 128 and exit_code - 128 in signal.valid_signals():
        signum = exit_code - 128
    return ProcessOutcome(
        exit_code=None if signum else exit_code,
        signal=signum,
        stdout=bytes(drains[0].kept),
        stderr=bytes(drains[1].kept),
        results=bytes(drains[2].kept),
        truncated=any(d.total > d.cap for d in drains[:2]),
        timed_out=timed_out,
        output_exceeded=exceeded.is_set(),
        wall_ms=wall_ms,
        cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000,
        peak_memory_bytes=peak_memory if cgroup else usage.ru_maxrss * 1024,
        enforcement="cgroup-v1" if cgroup else "rlimit",
        memory_limit_hit=memory_hit,
        pids_limit_hit=pids_hit,
    )


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
