"""Per-execution cgroup (v1) for memory and process-count limits, where the host allows one.

When Crucible runs as root on a host with the v1 ``memory`` and ``pids`` controllers
mounted under ``/sys/fs/cgroup`` (this project's machines), each execution tree gets
its own cgroup in both: resident memory (not address space) is capped, a fork bomb is
stopped at ``pids.max`` for that tree alone, and the peak memory of the whole tree is
read back. Elsewhere :func:`create` returns None and the rlimits in ``process.py``
are the only limits; :attr:`ExecutionResult.enforcement` says which was in force.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")
PARENT = "crucible"


@dataclass
class Cgroup:
    """One execution's cgroup directories, one per controller."""

    paths: dict[str, Path]
    _oom_kills_before: int = 0
    _pids_max_before: int = 0

    def set_limits(self, *, memory_bytes: int | None = None, processes: int | None = None) -> None:
        """Change the limits (a resident sandbox's cgroup serves many executions)."""
        if memory_bytes is not None:
            memsw = self.paths["memory"] / "memory.memsw.limit_in_bytes"
            limit = self.paths["memory"] / "memory.limit_in_bytes"
            # memory+swap may never be below memory: raise it first, lower it last.
            order = [memsw, limit] if memory_bytes > _read_int(limit) else [limit, memsw]
            for path in order:
                if path.exists():
                    path.write_text(str(memory_bytes))
        if processes is not None:
            (self.paths["pids"] / "pids.max").write_text(str(processes))

    def reset_counters(self) -> None:
        """Start a new execution: zero the peak and failure counters, note the OOM-kill count."""
        for name in ("memory.max_usage_in_bytes", "memory.failcnt"):
            (self.paths["memory"] / name).write_text("0")
        self._oom_kills_before = self._oom_kills()
        self._pids_max_before = self._pids_max_events()

    def _oom_kills(self) -> int:
        fields = (self.paths["memory"] / "memory.oom_control").read_text().split()
        return int(dict(zip(fields[::2], fields[1::2])).get("oom_kill", "0"))

    def _pids_max_events(self) -> int:
        events = (self.paths["pids"] / "pids.events").read_text().split()
        return int(events[1]) if len(events) == 2 and events[0] == "max" else 0

    def join_files(self) -> list[str]:
        """The ``cgroup.procs`` files a child writes ``0`` to, to join before exec."""
        return [str(path / "cgroup.procs") for path in self.paths.values()]

    def peak_memory_bytes(self) -> int:
        return _read_int(self.paths["memory"] / "memory.max_usage_in_bytes")

    def memory_limit_hit(self) -> bool:
        """True when the tree hit its memory limit: the OOM killer acted in it, or a
        charge failed (``memory.failcnt``)."""
        return self._oom_kills() > self._oom_kills_before or _read_int(self.paths["memory"] / "memory.failcnt") > 0

    def pids_limit_hit(self) -> bool:
        return self._pids_max_events() > self._pids_max_before

    def processes(self) -> list[int]:
        """The pids in the cgroup now (an idle resident sandbox's cgroup holds none)."""
        return [int(p) for p in (self.paths["pids"] / "cgroup.procs").read_text().split()]

    def kill_all(self) -> None:
        """SIGKILL every process left in the cgroup (v1 has no cgroup.kill)."""
        for _ in range(50):
            pids = [int(p) for p in (self.paths["pids"] / "cgroup.procs").read_text().split()]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and delete the directories (retrying while the kernel reaps)."""
        self.kill_all()
        for path in self.paths.values():
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def available() -> bool:
    """True when this process may create cgroups in both controllers."""
    return os.geteuid() == 0 and all(os.access(ROOT / c, os.W_OK) for c in CONTROLLERS)


def create(*, memory_bytes: int, processes: int) -> Cgroup | None:
    """A fresh cgroup limiting memory to ``memory_bytes`` and tasks to ``processes``.

    Returns None (rlimits only) when cgroups are unavailable or cannot be written.
    """
    if not available():
        return None
    name = f"x-{os.getpid()}-{secrets.token_hex(6)}"
    paths = {c: ROOT / c / PARENT / name for c in CONTROLLERS}
    try:
        for path in paths.values():
            path.mkdir(parents=True)
        (paths["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        # Swap would let the tree exceed its memory quietly; cap memory+swap too where supported.
        memsw = paths["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(memory_bytes))
        (paths["pids"] / "pids.max").write_text(str(processes))
    except OSError:
        for path in paths.values():
            try:
                path.rmdir()
            except OSError:
                pass
        return None
    return Cgroup(paths=paths)
