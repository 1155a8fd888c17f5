"""What a session left on the host, read from ``/proc`` and the cgroup tree (its worker runs in
the test's own process: see the ``session_pool`` fixture)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sandboxes import cgroups


def pid_namespace(pid: int) -> str | None:
    """The pid namespace of ``pid`` (``pid:[inode]``), or None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def processes_in(namespace: str) -> list[int]:
    """The host pids of the live (not zombie) processes in a pid namespace."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            with open(f"/proc/{entry}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def cgroup_exists(name: str) -> bool:
    """True while a cgroup of that name exists in either controller."""
    return bool(name) and any(
        (cgroups.ROOT / c / cgroups.PARENT / name).exists() for c in cgroups.CONTROLLERS
    )


def wait_until(check, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def session_gone(pid: int, namespace: str | None, cgroup: str, seconds: float = 10.0) -> bool:
    """Wait until nothing of a closed session is left: its init, every process of its pid
    namespace, its cgroup. True when that happened within ``seconds``."""
    return wait_until(
        lambda: (
            not Path(f"/proc/{pid}").exists()
            and not (namespace and processes_in(namespace))
            and not cgroup_exists(cgroup)
        ),
        seconds,
    )


SESSION_MOUNT_POINTS = ("/workspace", "/tmp", "/dev/shm", "/proc", "/.store")


def host_mounts() -> set[tuple[str, str]]:
    """The mounts of the host's (this process's) mount namespace: ``(mount point, type)``."""
    mounts = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mounts.add((fields[4], fields[fields.index("-") + 1]))
    return mounts


def session_mounts_added(before: set[tuple[str, str]], store: Path) -> list[tuple[str, str]]:
    """Host mounts added since ``before`` that a session could have made: an overlay anywhere,
    anything on a session's own mount points or under the workspace store. (Other mounts
    come and go with other programs on a shared host.)"""
    return sorted(
        (point, kind)
        for point, kind in host_mounts() - before
        if kind == "overlay" or point in SESSION_MOUNT_POINTS or point.startswith(str(store))
    )
