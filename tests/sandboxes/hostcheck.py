"""What an execution left running on the host, read from ``/proc``."""

from __future__ import annotations

import os
import time

from sandboxes.grading import local_grader


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":  # a zombie holds no resources and is reaped by its parent
            parents[int(entry)] = int(fields[1])
    return parents


def sandbox_leftovers(wait_s: float = 3.0, grader=None) -> list[int]:
    """Pids still running under a grader's resident sandboxes (this thread's Python grader
    by default); empty when idle, but for a Node grader's pre-booted next pair.

    Between executions a zygote has no children: anything under one is a process that
    outlived its execution (a daemon, a thread group, a child that ignored signals).
    """
    grader = grader or local_grader()
    spare = getattr(grader, "spare", None)
    allowed = {warm.resolve() for warm in spare} if spare else set()
    roots = {z.process.pid for z in (grader.runner, grader.driver) if z.process is not None}
    deadline = time.monotonic() + wait_s
    while True:
        parents = _parents()
        left = []
        for pid in parents:
            ancestor = parents.get(pid)
            while ancestor and ancestor not in roots:
                ancestor = parents.get(ancestor)
            if ancestor in roots and pid not in allowed and parents.get(pid) not in allowed:
                left.append(pid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
