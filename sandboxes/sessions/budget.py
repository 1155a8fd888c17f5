"""What the sessions of one worker may use together: a count, memory and disk.

Each session has its own limits (:class:`~sandboxes.sessions.limits.SessionLimits`), but a
worker opening sessions without a bound lets sixty of them open in a second and eight that fill
their workspace, ``/tmp`` and ``/dev/shm`` take gigabytes of the host's memory. So a worker's
sessions share a budget (:class:`SessionBudget`, one per worker process, every slot's
:class:`~sandboxes.sessions.host.SessionHost` asks it):

* **count**: at most ``CRUCIBLE_SESSION_MAX_PER_WORKER`` open sessions (default 512);
* **memory**: every session's cgroup lives inside the worker's budget cgroup (v1 ``memory``,
  memory+swap too), limited to ``CRUCIBLE_SESSION_MEMORY_BUDGET`` bytes (default half the
  machine's memory): their processes and the tmpfs pages of their workspaces, ``/tmp`` and
  ``/dev/shm`` together can never take more; an open is refused while their usage leaves less
  than a session's headroom (64 MiB), and a session whose own memory limit exceeds the budget is
  refused outright;
* **disk** (a quota): what the sessions may write (each one's ``workspace_bytes + tmp_bytes +
  shm_bytes``, reserved when it opens) plus the worker's materialised workspaces (the
  copy-on-write layers' lower halves, on the host's disk) together at most
  ``CRUCIBLE_SESSION_DISK_BUDGET`` bytes (default: the memory budget). A session's files live
  in memory (tmpfs pages, which no OOM kill frees), so a disk budget below the memory budget
  keeps files from filling it: the rest is left to processes, which the kernel can kill.

A refused open is answered with kind ``capacity`` (the client raises
:class:`~sandboxes.sessions.client.SessionRefused`, an infrastructure condition, never a
verdict on the policy) and a message naming the limit and the setting. Without cgroups (a pod
that is not root) the memory budget is not enforced; the count and disk are.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from sandboxes import cgroups
from sandboxes.sessions.limits import MEMORY_HEADROOM_BYTES, SessionLimits


class OverBudget(Exception):
    """An open the worker's budget has no room for (``kind`` ``capacity``)."""

    kind = "capacity"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class BudgetLimits:
    """The budget's three bounds (see the module)."""

    max_sessions: int = 512
    memory_bytes: int = 0  # 0: half of this machine's memory
    disk_bytes: int = 0  # 0: the memory budget

    def resolved_memory(self) -> int:
        if self.memory_bytes:
            return self.memory_bytes
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2

    def resolved_disk(self) -> int:
        return self.disk_bytes or self.resolved_memory()

    @classmethod
    def from_settings(cls) -> BudgetLimits:
        """``CRUCIBLE_SESSION_MAX_PER_WORKER``, ``..._MEMORY_BUDGET``, ``..._DISK_BUDGET``."""
        from django.conf import settings  # noqa: PLC0415 (the worker reads them once)

        return cls(
            max_sessions=settings.SESSION_MAX_PER_WORKER,
            memory_bytes=settings.SESSION_MEMORY_BUDGET,
            disk_bytes=settings.SESSION_DISK_BUDGET,
        )


class SessionBudget:
    """One worker's session budget (see the module). Thread-safe."""

    def __init__(self, limits: BudgetLimits | None = None, *, store=None) -> None:
        """``store``: the worker's :class:`~sandboxes.sessions.store.WorkspaceStore`, whose
        materialised bytes count against the disk budget."""
        self.limits = limits or BudgetLimits()
        self.store = store
        self.memory_bytes = self.limits.resolved_memory()
        self.disk_bytes = self.limits.resolved_disk()
        self.cgroup = cgroups.create(
            memory_bytes=self.memory_bytes, processes=None, sweep=False, kind="w"
        )
        self._lock = threading.Lock()
        self.open = 0
        self.reserved = 0  # bytes the open sessions may write (their tmpfs sizes)

    @staticmethod
    def writable(limits: SessionLimits) -> int:
        """What one session may write: its workspace layer, ``/tmp`` and ``/dev/shm``."""
        return limits.workspace_bytes + limits.tmp_bytes + limits.shm_bytes

    def admit(self, limits: SessionLimits) -> None:
        """Count one more open session and reserve what it may write, if there is room
        (release it with :meth:`release`, with the same limits).

        Raises:
            OverBudget: the count is reached, the session's memory limit is over the
                budget, the worker's sessions leave no memory, or its writable space does
                not fit the disk budget (the message names the limit and its setting).
        """
        budget = self.limits
        if limits.memory_bytes > self.memory_bytes:
            raise OverBudget(
                f"a session of {limits.memory_bytes} bytes of memory cannot fit this worker's "
                f"session memory budget of {self.memory_bytes} bytes "
                "(CRUCIBLE_SESSION_MEMORY_BUDGET); ask for less"
            )
        with self._lock:
            if self.open >= budget.max_sessions:
                raise OverBudget(
                    f"this worker holds {self.open} sessions, its limit "
                    "(CRUCIBLE_SESSION_MAX_PER_WORKER); close sessions or add workers"
                )
            if self.cgroup is not None:
                used = self.cgroup.usage_bytes()
                if used + MEMORY_HEADROOM_BYTES > self.memory_bytes:
                    raise OverBudget(
                        f"this worker's sessions use {used} of their {self.memory_bytes} byte "
                        "memory budget (CRUCIBLE_SESSION_MEMORY_BUDGET); no room for another"
                    )
            wanted = self.writable(limits)
            stored = self.store.bytes if self.store is not None else 0
            if self.reserved + stored + wanted > self.disk_bytes:
                raise OverBudget(
                    f"this worker's sessions may write {self.reserved} bytes and its workspaces "
                    f"take {stored}; a session that may write {wanted} more would exceed "
                    f"its {self.disk_bytes} byte disk budget (CRUCIBLE_SESSION_DISK_BUDGET); "
                    "ask for smaller workspace_bytes, tmp_bytes or shm_bytes"
                )
            self.open += 1
            self.reserved += wanted

    def release(self, limits: SessionLimits) -> None:
        """One open session fewer (``limits``: the ones it was admitted with)."""
        with self._lock:
            self.open = max(0, self.open - 1)
            self.reserved = max(0, self.reserved - self.writable(limits))

    def check_disk(self, stored_bytes: int, more: int) -> None:
        """Refuse a workspace of ``more`` bytes when the store already holds ``stored_bytes``
        (the store's ``room`` callback: called under its lock).

        Raises:
            OverBudget: it would put the sessions over the disk budget.
        """
        with self._lock:
            if self.reserved + stored_bytes + more > self.disk_bytes:
                raise OverBudget(
                    f"this worker's workspaces take {stored_bytes} bytes and its sessions may "
                    f"write {self.reserved}; a workspace of {more} bytes more would exceed its "
                    f"{self.disk_bytes} byte disk budget (CRUCIBLE_SESSION_DISK_BUDGET)"
                )

    def close(self) -> None:
        """Remove the budget cgroup (its sessions' cgroups are gone by then)."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
