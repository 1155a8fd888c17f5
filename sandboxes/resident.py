"""Host side of a resident sandbox: start a zygote, hand it executions, watch their trees.

A :class:`Zygote` is one warm interpreter inside its own namespaces
(``harness/zygote.py`` says what it isolates and how). :meth:`Zygote.start_tree`
asks it for one tree with the descriptors the tree uses; the zygote clones it and
answers its pid (:meth:`Zygote.tree_pid`). :func:`watch` drains a set of trees'
pipes with one ``selectors`` loop, enforces the wall clock and the output cap by
SIGKILL, and returns each tree's :class:`~sandboxes.process.ProcessOutcome`.

Memory and process count are held by a cgroup per zygote (v1 ``memory`` and
``pids``, created by :mod:`sandboxes.cgroups` where the host allows it) that the
zygote lives in, so its trees are born there; limits and the peak are set per
execution. Elsewhere rlimits alone hold them, and the outcome's ``enforcement``
says so; its ``readonly_root`` says how the zygote made its root read-only.

A step of the isolation the kernel refuses (a namespace, a mount, a tree's own
``/proc``) raises :class:`SandboxSetupFailed`, naming the step and what to change:
the host or pod cannot run sandboxes as configured, and nothing of the submission ran.
"""

from __future__ import annotations

import array
import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from sandboxes import cgroups
from sandboxes.process import NOBODY, SANDBOX_ENV, Limits, ProcessOutcome

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
RESULTS_CAP_BYTES = 4 * 1024**2
AUDIT_CAP_BYTES = (
    64 * 1024
)  # the harness sends far less (a capped list); more is the submission's noise


class ZygoteDied(RuntimeError):
    """The resident sandbox process is gone or stopped answering (an ``infra_error``)."""


# What each refused step means and what to change, for an operator (deploy/README.md,
# "Isolation in pods", has the measurements behind it).
DEPLOY_GUIDE = (
    "On Kubernetes run the sandbox pods under gVisor (deploy/kubernetes/components/gvisor) or with "
    "nested namespaces (components/sandbox-nested-namespaces); see deploy/README.md, "
    '"Isolation in pods".'
)
REMEDIES = {
    "namespaces": (
        "The sandbox isolates each execution in its own user, mount, network, ipc and uts "
        "namespaces (unshare(2)), and this kernel refused them. In a container that is the "
        "runtime's seccomp profile (RuntimeDefault refuses unshare and mount without "
        "CAP_SYS_ADMIN) or user namespaces turned off (sysctl user.max_user_namespaces=0; on "
        "Ubuntu kernel.apparmor_restrict_unprivileged_userns=1). " + DEPLOY_GUIDE
    ),
    "identity": (
        "The sandbox maps its own uid 0 to this process's user in a new user namespace, and the "
        "kernel refused the mapping (/proc/PID/uid_map). " + DEPLOY_GUIDE
    ),
    "root": (
        "The sandbox builds a read-only root of its own (mount(2), pivot_root(2), then "
        "mount_setattr(2) or one MS_REMOUNT per mount), and this kernel refused a step: a seccomp "
        "profile that refuses mount without CAP_SYS_ADMIN, or an LSM policy. " + DEPLOY_GUIDE
    ),
    "tree": (
        "Each execution gets new mount, pid, ipc and uts namespaces (clone(2)), its own tmpfs and "
        "its own /proc, and this kernel refused a step. " + DEPLOY_GUIDE
    ),
    "session": (
        "Each session gets new mount, pid, network, ipc and uts namespaces (clone(2)), a "
        "tmpfs, an overlay mount of its workspace inside the sandbox's user namespace (Linux "
        "5.11+) and its own /proc, and this kernel refused a step. " + DEPLOY_GUIDE
    ),
    "proc": (
        "Each execution mounts its own /proc in its new pid namespace, and the kernel refuses that "
        "while /proc is masked: container runtimes mask /proc/kcore, /proc/keys and others unless "
        "the pod sets procMount: Unmasked (which needs hostUsers: false). " + DEPLOY_GUIDE
    ),
}
STAGES = {
    "namespaces": "entering its namespaces",
    "identity": "mapping its user",
    "root": "building its read-only root",
    "tree": "setting up an execution",
    "session": "setting up a session",
}


class SandboxSetupFailed(ZygoteDied):
    """The kernel refused a step of the sandbox's isolation: the host (or pod) cannot run
    sandboxes as it is configured. Nothing of the submission ran: an ``infra_error``.

    Attributes:
        stage: ``namespaces`` (unshare), ``identity`` (the uid map), ``root`` (the read-only
            root), ``tree`` (one execution's namespaces, tmpfs or /proc) or ``session`` (one
            session's namespaces, overlay, tmpfs or /proc).
        reason: the step and the kernel's answer, e.g. ``mount /proc: Operation not permitted``.
    """

    def __init__(self, stage: str, reason: str) -> None:
        self.stage, self.reason = stage, reason
        super().__init__(f"sandbox setup failed {STAGES.get(stage, stage)}: {reason}")

    @property
    def remedy(self) -> str:
        """What the refused step is for and what to change (one paragraph)."""
        if self.stage == "tree" and "mount /proc" in self.reason:
            return REMEDIES["proc"]
        return REMEDIES.get(self.stage, DEPLOY_GUIDE)


def _send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.sendall(data)


def _receive(sock: socket.socket, timeout: float) -> dict:
    """The zygote's next message.

    Raises:
        SandboxSetupFailed: it reports a refused step of its own isolation (``stage``).
        ZygoteDied: it exited or did not answer within ``timeout`` seconds.
    """
    sock.settimeout(timeout)
    try:
        data = sock.recv(1 << 20)
    except (TimeoutError, OSError) as exc:
        raise ZygoteDied(f"sandbox process did not answer: {exc}") from exc
    if not data:
        raise ZygoteDied("sandbox process exited")
    message = json.loads(data)
    if "error" in message and "stage" in message:
        raise SandboxSetupFailed(str(message["stage"]), str(message["error"]))
    return message


def _write_id_maps(pid: int) -> int:
    """Map uid/gid 0 inside to this process's ids; as root, also 65534 to nobody.

    Returns the uid executions run as inside the namespace.
    """
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        maps, sandbox_uid = ("0 0 1\n65534 65534 1\n", "0 0 1\n65534 65534 1\n"), NOBODY
    else:
        with open(f"/proc/{pid}/setgroups", "w") as handle:
            handle.write("deny")
        maps, sandbox_uid = (f"0 {uid} 1\n", f"0 {gid} 1\n"), 0
    with open(f"/proc/{pid}/uid_map", "w") as handle:
        handle.write(maps[0])
    with open(f"/proc/{pid}/gid_map", "w") as handle:
        handle.write(maps[1])
    return sandbox_uid


@dataclass
class Zygote:
    """One resident sandbox process serving one role (``python_runner``, ``python_check``).

    Args:
        interpreter: the Python the zygote runs (see :mod:`sandboxes.interpreters`).
        role: the harness whose ``main(spec)`` each execution runs.
        sources: harness name -> source, loaded into the zygote once.
        bind_dirs: host directories bound read-only into its root besides the system's.
        extra_config: more keys of its ``config`` message (the session zygote's ``store``,
            an environment's ``system_root``, ``mounts``, ``python_path``, ``environ``).
        launcher: the argv that starts ``interpreter`` when running its path is not enough
            (an environment root's own dynamic loader and libraries); empty: the path.
    """

    interpreter: str
    role: str
    sources: dict[str, str]
    bind_dirs: list[str] = field(default_factory=list)
    extra_config: dict = field(default_factory=dict)
    launcher: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None
    control: socket.socket | None = None
    cgroup: cgroups.Cgroup | None = None
    readonly_root: str = ""  # how its root was made read-only: "mount_setattr" or "remount"
    unanswered: int = 0  # trees asked for whose pid (or failure) has not been read yet

    def start(self) -> None:
        """Start the process and wait until it is isolated and warm.

        Raises:
            SandboxSetupFailed: the kernel refused a step of its isolation (see ``remedy``).
            ZygoteDied: it exited or did not report ready within 30 s.
        """
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        source = os.path.dirname(__file__) + "/harness/zygote.py"
        with open(source, encoding="utf-8") as handle:
            program = handle.read()
        self.process = subprocess.Popen(
            [
                *(self.launcher or [self.interpreter]),
                "-I",
                "-S",
                "-c",
                program,
                str(there.fileno()),
                str(os.getpid()),
            ],
            env=dict(SANDBOX_ENV),
            stdin=subprocess.DEVNULL,
            pass_fds=(there.fileno(),),
            close_fds=True,
            start_new_session=True,
        )
        there.close()
        self.control = here
        try:
            _receive(here, START_TIMEOUT_S)
            # Into its cgroup before it has any child: every tree is then born there.
            self.cgroup = cgroups.create(
                memory_bytes=Limits().memory_bytes, processes=Limits().processes
            )
            if self.cgroup:
                self.cgroup.join(self.process.pid)
            try:
                sandbox_uid = _write_id_maps(self.process.pid)
            except OSError as exc:
                raise SandboxSetupFailed("identity", f"writing its uid/gid map: {exc}") from exc
            _send(
                here,
                {
                    "op": "config",
                    "role": self.role,
                    "sources": self.sources,
                    "sandbox_uid": sandbox_uid,
                    "bind_dirs": self.bind_dirs,
                    **self.extra_config,
                },
            )
            ready = _receive(here, START_TIMEOUT_S)
            self.readonly_root = str(ready.get("readonly_root", ""))
            self.unanswered = 0
            if self.cgroup:
                self.cgroup.note_idle_usage()
        except SandboxSetupFailed:
            self.stop()
            raise
        except (ZygoteDied, OSError) as exc:
            self.stop()
            raise ZygoteDied(f"sandbox process for {self.role} failed to start: {exc}") from exc

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop the process and free its cgroup.

        Closing the control socket lets an idle zygote reap its last tree and exit on
        its own (no zombie handed to the host's init); one that does not within a
        second is killed, and its trees die with it (PDEATHSIG).
        """
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.process is not None:
            try:
                self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self.process.wait()
            self.process = None
        if self.cgroup:
            self.cgroup.remove()
            self.cgroup = None

    def start_tree(
        self,
        *,
        role_fds: list[str],
        limits: Limits,
        fds: dict[str, int],
        exec_argv: list[str] | None = None,
        own_network: bool = False,
        loopback: bool = False,
        tmp_inodes: int | None = None,
    ) -> None:
        """Ask for one execution tree, booted up to reading its job; ``fds`` (name ->
        descriptor) are closed here once sent. Does not wait: :meth:`tree_pid` does.

        ``fds`` must hold ``stdout``, ``stderr`` and ``exit``; the role's own
        descriptors named in ``role_fds`` are passed on as 3, 4, ... in that order.
        With ``exec_argv`` the tree ``execve``s that interpreter instead of running
        the zygote's Python role (no address-space rlimit then: V8 reserves far more
        than it uses; the cgroup or the interpreter's own heap flag holds memory).
        ``own_network`` gives the tree a network namespace of its own (for hostile code;
        about half a millisecond more per tree here); ``loopback`` (with it) brings that
        namespace's ``lo`` up before the tree drops its capabilities. ``tmp_inodes``: the
        files its ``/tmp`` may hold (default 4096).

        Raises:
            ZygoteDied: the zygote is gone; the caller reports ``infra_error``.
        """
        if not self.alive or self.control is None:
            for fd in fds.values():
                os.close(fd)
            raise ZygoteDied("sandbox process is not running")
        names = list(fds)
        request = {
            "op": "run",
            "fds": names,
            "role_fds": role_fds,
            "exec": exec_argv,
            "netns": own_network or loopback,
            "loopback": loopback,
            "limits": {
                "tmp_inodes": tmp_inodes,
                "cpu_s": limits.cpu_s,
                "file_size_bytes": limits.file_size_bytes,
                "processes": limits.processes,
                # With a cgroup capping resident memory, the address-space rlimit only stops
                # absurd reservations; without one it is the memory limit.
                "address_space_bytes": 0
                if exec_argv
                else limits.memory_bytes * 4
                if self.cgroup
                else limits.memory_bytes,
            },
        }
        try:
            _send(self.control, request, [fds[name] for name in names])
            self.unanswered += 1
        except OSError as exc:
            raise ZygoteDied(f"sandbox process for {self.role} failed: {exc}") from exc
        finally:
            for fd in fds.values():
                os.close(fd)

    def tree_pid(self) -> int:
        """The pid (in the host's pid namespace) of the tree :meth:`start_tree` asked for,
        once the tree is set up (namespaces, mounts, identity) and waits for its job.

        Raises:
            SandboxSetupFailed: the tree could not be set up (``stage`` ``tree``; nothing
                of any job ran in it).
            ZygoteDied: the zygote died, or no tree was asked for that is not answered yet.
        """
        if self.control is None:
            raise ZygoteDied("sandbox process is not running")
        if self.unanswered < 1:  # its answer was read already (a failure): none is coming
            raise ZygoteDied(f"sandbox process for {self.role} owes no tree")
        self.unanswered -= 1
        reply = _receive(self.control, START_TIMEOUT_S)
        if "pid" not in reply:
            if reply.get("setup"):
                raise SandboxSetupFailed("tree", str(reply.get("error")))
            raise ZygoteDied(
                f"sandbox process for {self.role} could not start a tree: {reply.get('error')}"
            )
        return int(reply["pid"])

    def start_session(self, *, fds: dict[str, int], request: dict) -> int:
        """Clone one session's init (``{"op": "session"}``, see ``harness/zygote.py``) and wait
        until it is set up; ``fds`` (name -> descriptor) are closed here once sent.

        Returns:
            the session init's pid in the host's pid namespace.

        Raises:
            SandboxSetupFailed: the session could not be set up (stage ``session``).
            ZygoteDied: the zygote is gone or did not answer within 30 s.
        """
        if not self.alive or self.control is None:
            for fd in fds.values():
                os.close(fd)
            raise ZygoteDied("sandbox process is not running")
        names = list(fds)
        try:
            _send(self.control, dict(request, op="session", fds=names), [fds[n] for n in names])
        except OSError as exc:
            raise ZygoteDied(f"sandbox process for {self.role} failed: {exc}") from exc
        finally:
            for fd in fds.values():
                os.close(fd)
        reply = _receive(self.control, START_TIMEOUT_S)
        if "pid" not in reply:
            if reply.get("setup"):
                raise SandboxSetupFailed("session", str(reply.get("error")))
            raise ZygoteDied(f"sandbox process for {self.role} answered {reply}")
        return int(reply["pid"])

    def prepare_cgroup(self, limits: Limits) -> None:
        """Set the next execution's memory and process limits and zero its peak."""
        if self.cgroup:
            self.cgroup.begin_execution(
                memory_bytes=limits.memory_bytes, processes=limits.processes
            )

    def leftovers(self) -> list[int]:
        """Processes in this sandbox's cgroup other than the resident process itself."""
        if not self.cgroup or self.process is None:
            return []
        return [pid for pid in self.cgroup.processes() if pid != self.process.pid]

    def kill_trees(self) -> None:
        """SIGKILL every process of this sandbox's trees, now (with a cgroup)."""
        if self.cgroup and self.process is not None:
            self.cgroup.kill_all(spare=self.process.pid)


@dataclass
class Tree:
    """One started execution tree as the host sees it."""

    zygote: Zygote
    pid: int
    pipes: dict[
        str, int
    ]  # name -> read end: stdout, stderr, exit, and optionally results and audit
    limits: Limits
    kill_on_output: bool = True


def watch(trees: list[Tree], deadline_s: float) -> list[ProcessOutcome]:
    """Drain every tree's pipes to EOF; kill all on the wall clock, one on its output cap.

    Returns one :class:`ProcessOutcome` per tree, in order.
    """
    start = time.monotonic()
    selector = selectors.DefaultSelector()
    kept = [{name: bytearray() for name in tree.pipes} for tree in trees]
    totals = [{name: 0 for name in tree.pipes} for tree in trees]
    exceeded = [False] * len(trees)
    timed_out = False
    for index, tree in enumerate(trees):
        for name, fd in tree.pipes.items():
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ, (index, name))
    open_count = sum(len(t.pipes) for t in trees)
    while open_count:
        remaining = deadline_s - (time.monotonic() - start)
        if remaining <= 0 and not timed_out:
            timed_out = True
            for tree in trees:
                _kill_tree(tree)
            remaining = 5.0
        events = selector.select(timeout=max(remaining, 0.01) if not timed_out else 5.0)
        if not events and timed_out:
            break  # killed and still silent after 5 s: give up on what is left
        for key, _mask in events:
            index, name = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                selector.unregister(key.fd)
                os.close(key.fd)
                open_count -= 1
                continue
            tree = trees[index]
            totals[index][name] += len(chunk)
            cap = (
                RESULTS_CAP_BYTES
                if name in ("results", "exit")
                else AUDIT_CAP_BYTES
                if name == "audit"
                else tree.limits.output_cap_bytes
            )
            room = cap - len(kept[index][name])
            if room > 0:
                kept[index][name] += chunk[:room]
            # The audit pipe is the submission's to write as well: a flood there is an output flood.
            if (
                name in ("stdout", "stderr", "audit")
                and tree.kill_on_output
                and not exceeded[index]
                and sum(totals[index].get(n, 0) for n in ("stdout", "stderr", "audit"))
                > tree.limits.output_kill_bytes
            ):
                exceeded[index] = True
                _kill_tree(tree)
    for key in list(selector.get_map().values()):
        os.close(key.fd)
    selector.close()
    for tree in trees:  # nothing of an execution outlives it, whatever state it left
        if tree.zygote.leftovers():
            tree.zygote.kill_trees()
    wall_ms = (time.monotonic() - start) * 1000
    return [
        _outcome(
            tree, kept[i], totals[i], timed_out=timed_out, exceeded=exceeded[i], wall_ms=wall_ms
        )
        for i, tree in enumerate(trees)
    ]


def _outcome(
    tree: Tree, kept: dict, totals: dict, *, timed_out: bool, exceeded: bool, wall_ms: float
) -> ProcessOutcome:
    exit_code = signum = None
    cpu_ms = 0.0
    maxrss = 0
    try:
        report = json.loads(bytes(kept.get("exit", b"")) or b"null")
    except ValueError:
        report = None
    if isinstance(report, dict):
        status = int(report["status"])
        code = os.waitstatus_to_exitcode(status)
        exit_code, signum = (None, -code) if code < 0 else (code, None)
        cpu_ms = (float(report["utime"]) + float(report["stime"])) * 1000
        maxrss = int(report["maxrss_kb"]) * 1024
    else:
        signum = signal.SIGKILL  # no report: the zygote died with the tree
    cgroup = tree.zygote.cgroup
    memory_hit = False
    peak = maxrss
    if cgroup:
        peak = cgroup.peak_memory_bytes()
        memory_hit = (
            signum == signal.SIGKILL and cgroup.memory_limit_hit()
        )  # the OOM killer's signal
    return ProcessOutcome(
        exit_code=exit_code,
        signal=signum,
        stdout=bytes(kept.get("stdout", b"")),
        stderr=bytes(kept.get("stderr", b"")),
        results=bytes(kept.get("results", b"")),
        audit=bytes(kept.get("audit", b"")),
        truncated=totals.get("stdout", 0) > tree.limits.output_cap_bytes
        or totals.get("stderr", 0) > tree.limits.output_cap_bytes,
        timed_out=timed_out,
        output_exceeded=exceeded,
        wall_ms=wall_ms,
        cpu_ms=cpu_ms,
        peak_memory_bytes=peak,
        enforcement="cgroup-v1" if cgroup else "rlimit",
        memory_limit_hit=memory_hit,
        readonly_root=tree.zygote.readonly_root,
    )


def _kill_tree(tree: Tree) -> None:
    """SIGKILL the tree's init G (the kernel then empties its pid namespace) and, with a
    cgroup, every process in it at once."""
    _kill(tree.pid)
    tree.zygote.kill_trees()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def interpreter_bind_dirs(interpreter: str) -> list[str]:
    """Directories outside ``/usr`` that an interpreter needs at run time (its prefix)."""
    real = os.path.realpath(interpreter)
    if real.startswith(("/usr/", "/bin/")):
        return []
    prefix = os.path.dirname(os.path.dirname(real))
    return [prefix] if prefix not in ("/", "") else []
