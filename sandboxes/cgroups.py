"""Cgroups (v1) for memory and process-count limits, where the host allows them.

When Crucible runs as root on a host with the v1 ``memory`` and ``pids`` controllers
mounted under ``/sys/fs/cgroup`` (this project's machines), each resident sandbox
process gets its own cgroup in both, and the one execution tree it runs at a time is
held there: resident memory (not address space) is capped, a fork bomb is stopped at
``pids.max`` for that tree alone, and the peak memory of the whole tree is read back.
Elsewhere :func:`create` returns None and the rlimits in ``process.py`` are the only
limits; :attr:`ExecutionResult.enforcement` says which was in force.
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
    """One resident sandbox's cgroup directories, one per controller.

    The resident process itself lives in the cgroup, so every tree it forks is born
    there (no per-execution attach, a slow path of cgroup v1). Its own usage, read while
    it has no tree (:meth:`note_idle_usage`), is the baseline: the memory limit is the
    execution's limit on top of it, and the peak reported is the peak above it.
    """

    paths: dict[str, Path]
    _baseline: int = 0
    _limit: int = 0
    _processes: int = 0
    _oom_kills_seen: int = 0

    def join(self, pid: int) -> None:
        """Move ``pid`` (the resident process, before it has children) into the cgroup."""
        for path in self.paths.values():
            (path / "cgroup.procs").write_text(str(pid))

    def note_idle_usage(self) -> None:
        """Read the resident process's own usage; call it while no tree is alive."""
        self._baseline = _read_int(self.paths["memory"] / "memory.usage_in_bytes")

    def begin_execution(self, *, memory_bytes: int, processes: int) -> None:
        """Set this execution's limits above the resident baseline and zero the peak."""
        memory = self.paths["memory"]
        limit = memory_bytes + self._baseline
        if (
            abs(limit - self._limit) > 4 * 1024**2
        ):  # the baseline drifts a little; rewrite on real change
            memsw, current = (
                memory / "memory.memsw.limit_in_bytes",
                memory / "memory.limit_in_bytes",
            )
            # memory+swap may never be below memory: raise it first, lower it last.
            for path in [memsw, current] if limit > _read_int(current) else [current, memsw]:
                if path.exists():
                    path.write_text(str(limit))
            self._limit = limit
        if processes != self._processes:
            (self.paths["pids"] / "pids.max").write_text(
                str(processes + 1)
            )  # + the resident process
            self._processes = processes
        (memory / "memory.max_usage_in_bytes").write_text("0")

    def reset_peak(self) -> None:
        """Zero the peak (a session's cgroup, before each call; its limits stay the session's)."""
        (self.paths["memory"] / "memory.max_usage_in_bytes").write_text("0")

    def usage_bytes(self) -> int:
        """Memory charged to the cgroup now (its processes and the tmpfs pages they wrote, its
        children's included), in bytes."""
        return _read_int(self.paths["memory"] / "memory.usage_in_bytes")

    def peak_memory_bytes(self) -> int:
        """Peak memory of this execution's tree (above the resident baseline), in bytes."""
        return max(
            0, _read_int(self.paths["memory"] / "memory.max_usage_in_bytes") - self._baseline
        )

    def memory_limit_hit(self) -> bool:
        """True when the OOM killer acted in the cgroup since the last call."""
        fields = (self.paths["memory"] / "memory.oom_control").read_text().split()
        kills = int(dict(zip(fields[::2], fields[1::2])).get("oom_kill", "0"))
        hit, self._oom_kills_seen = kills > self._oom_kills_seen, kills
        return hit

    def processes(self) -> list[int]:
        """The pids in the cgroup now."""
        return [int(p) for p in (self.paths["pids"] / "cgroup.procs").read_text().split()]

    def kill_all(self, *, spare: int | None = None) -> None:
        """SIGKILL every process in the cgroup but ``spare`` (v1 has no cgroup.kill)."""
        for _ in range(50):
            pids = [pid for pid in self.processes() if pid != spare]
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


def sweep_stale() -> int:
    """Remove the empty cgroups of processes that are gone (a worker killed with SIGKILL
    cannot remove its own), sessions' cgroups inside a dead worker's budget cgroup first;
    returns how many were removed."""
    removed = 0
    for controller in CONTROLLERS:
        parent = ROOT / controller / PARENT
        if not parent.is_dir():
            continue
        for path in [*parent.glob("w-*/x-*"), *parent.glob("x-*"), *parent.glob("w-*")]:
            owner = path.name.split("-")[1]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    path.rmdir()  # refused while a process is still in it
                    removed += 1
                except OSError:
                    pass
    return removed


def available() -> bool:
    """True when this process may create cgroups in both controllers."""
    return os.geteuid() == 0 and all(os.access(ROOT / c, os.W_OK) for c in CONTROLLERS)


def create(
    *,
    memory_bytes: int,
    processes: int | None,
    sweep: bool = True,
    inside: Cgroup | None = None,
    kind: str = "x",
) -> Cgroup | None:
    """A fresh cgroup limiting memory to ``memory_bytes`` and tasks to ``processes`` (None:
    no limit of its own).

    ``sweep`` first removes the cgroups dead processes left (:func:`sweep_stale`, a walk
    over all of them): off for a session's, opened by the hundred; the worker's reaper
    sweeps instead. ``inside``: a cgroup to nest it in (a worker's session budget: the
    parent's limits hold all its children together). ``kind``: ``x`` (an execution's or a
    session's) or ``w`` (a worker's budget, holding ``x`` cgroups).

    Returns None (rlimits only) when cgroups are unavailable or cannot be written.
    """
    if not available():
        return None
    if sweep:
        sweep_stale()
    name = f"{kind}-{os.getpid()}-{secrets.token_hex(6)}"
    if inside is not None:
        paths = {c: inside.paths[c] / name for c in CONTROLLERS}
    else:
        paths = {c: ROOT / c / PARENT / name for c in CONTROLLERS}
    try:
        for path in paths.values():
            path.mkdir(parents=True)
        (paths["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        # Swap would let the tree exceed its memory quietly; cap memory+swap too where supported.
        memsw = paths["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(memory_bytes))
        if processes is not None:
            (paths["pids"] / "pids.max").write_text(str(processes))
    except OSError:
        for path in paths.values():
            try:
                path.rmdir()
            except OSError:
                pass
        return None
    return Cgroup(paths=paths)
