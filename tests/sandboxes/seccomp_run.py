"""Run a command under a seccomp filter that emulates a container runtime's, as a pod would.

    python seccomp_run.py PROFILE COMMAND [ARGS...]

PROFILE is one of :data:`PROFILES`. The filter (built with libseccomp, as runc and
containerd build theirs) is loaded into this process, which then ``exec``s COMMAND: the
command and everything it starts run under it, as a container's processes run under the
runtime's. Loading it sets ``no_new_privs`` (as ``allowPrivilegeEscalation: false`` does).
"""

from __future__ import annotations

import errno
import os
import sys

import pyseccomp as seccomp

NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
# CLONE_NEWNET


def runtime_default(rules: seccomp.SyscallFilter) -> None:
    """containerd's (and Docker's) RuntimeDefault profile as a container without
    CAP_SYS_ADMIN gets it: the namespace and mount syscalls are allowed only with that
    capability, so they answer EPERM; ``clone`` with a namespace flag too; ``clone3``
    answers ENOSYS (the C library then falls back to ``clone``)."""
    for name in (
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "mount_setattr",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsmount",
        "fsconfig",
        "fspick",
        "sethostname",
        "setdomainname",
    ):
        rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(
            seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)
        )
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")


def no_mount_setattr(rules: seccomp.SyscallFilter) -> None:
    """``mount_setattr`` answers ENOSYS, as under gVisor (google/gvisor#13175), where the
    rest of the namespace and mount syscalls work."""
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "mount_setattr")


def mount_setattr_refused(rules: seccomp.SyscallFilter) -> None:
    """``mount_setattr`` answers EPERM and ``mount`` works: a profile written before the
    syscall existed (unknown syscalls refused with EPERM) on a node that allows namespaces."""
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "mount_setattr")


PROFILES = {
    "runtime-default": runtime_default,
    "no-mount-setattr": no_mount_setattr,
    "mount-setattr-refused": mount_setattr_refused,
}


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in PROFILES:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(PROFILES)}}} COMMAND [ARGS...]")
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    PROFILES[sys.argv[1]](rules)
    rules.load()
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
