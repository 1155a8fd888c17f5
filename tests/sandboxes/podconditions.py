"""Run a command under the conditions of a Kubernetes pod, emulated on this host (as root).

- ``seccomp``: a container runtime's seccomp profile (``seccomp_run.py``: containerd's
  RuntimeDefault without CAP_SYS_ADMIN, or gVisor's missing ``mount_setattr``);
- ``masked_proc``: ``/proc`` masked as runc masks it for ``procMount: Default`` (files bound
  over with /dev/null, ``/proc/sys`` read-only), in a private mount namespace;
- ``locked_etc``: ``/etc`` bound with ``nodev,noexec``, as a runtime's read-only or
  secret mounts come with flags the pod's user namespace cannot clear (the kernel locks
  them when the sandbox's user namespace copies the mount).

Everything here only wraps the command's argv; the masks live in a mount namespace of
the command's own and the host's mounts are left as they were.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MASK_PROC = (
    "mount --bind /dev/null /proc/keys && mount --bind /dev/null /proc/timer_list && "
    "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys"
)
LOCK_ETC = "mount --bind /etc /etc && mount -o remount,bind,nodev,noexec /etc"


def can_emulate() -> bool:
    """Root with util-linux ``unshare`` and ``mount``: what the emulation needs."""
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("mount"))


def wrap(
    argv: list[str],
    *,
    seccomp: str | None = None,
    masked_proc: bool = False,
    locked_etc: bool = False,
) -> list[str]:
    """``argv`` run under the named conditions (see the module)."""
    if seccomp:
        argv = [sys.executable, str(HERE / "seccomp_run.py"), seccomp, *argv]
    steps = [step for step, wanted in ((MASK_PROC, masked_proc), (LOCK_ETC, locked_etc)) if wanted]
    if steps:
        script = " && ".join(steps) + " && exec " + " ".join(shlex.quote(word) for word in argv)
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    return argv
