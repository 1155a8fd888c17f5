"""What every sandbox shares: its limits, its environment and the raw outcome of a process tree.

The isolation itself lives in ``harness/zygote.py`` (inside the sandbox) and
``resident.py`` (the host's side): namespaces entered directly, a read-only root
(``mount_setattr``, or one remount per mount where the kernel lacks it), cgroup v1
memory and pids limits where the host allows them, rlimits always.
"""

from __future__ import annotations

from dataclasses import dataclass

NOBODY = 65534
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution.

    Attributes:
        wall_timeout_s: seconds of wall-clock time before the tree is killed.
        cpu_s: CPU seconds (RLIMIT_CPU); the kernel sends SIGXCPU, then SIGKILL.
        memory_bytes: memory of the whole tree (cgroup) or address space of each
            process (RLIMIT_AS) where no cgroup is available.
        output_cap_bytes: bytes of stdout and of stderr kept; more is drained and
            counted, and past ``output_kill_bytes`` the tree is killed.
        file_size_bytes: the largest file the tree may write (RLIMIT_FSIZE), and the
            size of its private /tmp.
        processes: processes of the sandbox user (RLIMIT_NPROC), enforced when the
            sandbox drops to its own user.
        test_timeout_s: seconds one call of the program under test may take before that
            test fails (Python unit tests; an alarm in the program's process, so a
            program that blocks it still meets ``wall_timeout_s``); None: no per-test limit.
    """

    wall_timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 2 * 1024**3
    output_cap_bytes: int = 64 * 1024
    output_kill_bytes: int = 8 * 1024**2
    file_size_bytes: int = 16 * 1024**2
    processes: int = 512
    test_timeout_s: float | None = None


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
    audit: bytes = (
        b""  # the audit pipe's lines (``harness/python_runner.py``), when the tree had one
    )
    readonly_root: str = (
        ""  # how the sandbox's root was made read-only: "mount_setattr" or "remount"
    )
