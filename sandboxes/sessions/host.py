"""The worker's side of sessions: one session zygote, the sessions it opened, their calls.

A :class:`SessionHost` belongs to one worker slot. Its zygote (``harness/zygote.py`` with
the ``session`` role) entered its user, mount, network, ipc and uts namespaces once and
holds the read-only system view and the slot's workspace store (``/.store``). Opening a
session is one ``clone`` from it into fresh mount, pid, network, ipc and uts namespaces:
the session's init (``harness/session_init.py``) mounts the workspace's copy-on-write
overlay and its own tmpfs and ``/proc``, and stays, as pid 1, for the session's life. The
host then moves it into a cgroup of its own (v1 ``memory`` and ``pids``, where the host
allows it) before it forks anything.

A call (:meth:`SessionHost.exec`, :meth:`SessionHost.file_op`) is one message to the
session's init; an exec gets back the pipes of the shell booted for it, a file operation
sends its own (``calls.py`` drains them: output caps, a kill on an output flood), and the
init answers when the call's process has exited and everything it left has been killed and
reaped. A session whose init is gone, or stops answering, is
*lost*: it is torn down and its calls raise :class:`SessionGone` (``lost``), which the
worker answers as ``infra_error``. Closing (by the caller or a lease, :meth:`expire`)
kills the init, and the kernel the rest of its pid namespace; its mounts go with its
mount namespace, its cgroup is removed and its workspace released.

Thread model: :meth:`start` and :meth:`restart_zygote` run on the thread that owns the
host (the zygote dies with the thread that forked it, ``PDEATHSIG``); opens (one at a time
on the zygote's socket), calls and closes of different sessions may run on other threads at
once; one session takes one call at a time.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import secrets
import select
import signal
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.environments.mount import HOST, Mount, mount_for
from sandboxes.interpreters import python_interpreter
from sandboxes.process import SANDBOX_ENV
from sandboxes.resident import Zygote, _send, interpreter_bind_dirs
from sandboxes.sessions.budget import SessionBudget
from sandboxes.sessions.calls import (
    CallOutcome,
    InitGone,
    drain,
    exec_result,
    receive_with_fds,
    unstarted,
)
from sandboxes.sessions.layout import LayoutCache
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.store import WorkspaceStore

log = logging.getLogger(__name__)
HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
ANSWER_GRACE_S = 10.0  # past its wall clock, a call's answer may take this long, then: lost
CLOSE_WAIT_S = 2.0
FILE_OP_TIMEOUT_S = 30.0
FILE_RESULT_CAP_BYTES = 96 * 1024**2
ENDED_REMEMBERED = 10_000
SESSION_ENV = {
    **SANDBOX_ENV,
    # Debian's own default: an agent's shell finds the system's daemons (nginx, logrotate, cron)
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "TERM": "dumb",
    "USER": "sandbox",
}


class SessionGone(Exception):
    """The session cannot take calls.

    Attributes:
        session_id: the session.
        kind: ``lost`` (its processes died, stopped answering, or its worker restarted: an
            ``infra_error``), ``expired`` (closed by its lease: idle timeout or maximum
            lifetime) or ``closed`` (closed by its caller).
        reason: why, in words.
    """

    def __init__(self, session_id: str, kind: str, reason: str) -> None:
        self.session_id, self.kind, self.reason = session_id, kind, reason
        verb = {"lost": "was lost", "expired": "expired"}.get(kind, "is closed")
        super().__init__(f"session {session_id} {verb}: {reason}")


class FileOpRefused(Exception):
    """A file operation refused for its input (``kind`` as in ``harness/session_files.py``)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.detail = kind, detail


@functools.lru_cache(maxsize=1)
def _sources() -> dict[str, str]:
    return {
        "session_files": (HARNESS_DIR / "session_files.py").read_text(encoding="utf-8"),
        "session": (HARNESS_DIR / "session_init.py").read_text(encoding="utf-8"),
    }


@dataclass
class HostedSession:
    """One open session as its host sees it."""

    id: str
    pid: int
    pidfd: int
    control: socket.socket
    cgroup: cgroups.Cgroup | None
    limits: SessionLimits
    digest: str
    opened_at: float
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    ended: str = ""  # why it ended, once it has

    @property
    def cgroup_name(self) -> str:
        return self.cgroup.paths["pids"].name if self.cgroup else ""


class SessionHost:
    """One slot's session zygote and open sessions (see the module)."""

    def __init__(
        self,
        store: WorkspaceStore,
        *,
        interpreter: str | None = None,
        mount: Mount = HOST,
        budget: SessionBudget | None = None,
    ) -> None:
        """``mount``: the environment its sessions run in (the runtime's root and packages,
        see :func:`sandboxes.environments.mount.mount_for`); default the host's Python.
        ``budget``: the worker's session budget its opens ask (:mod:`.budget`: a count, a
        parent cgroup its sessions' cgroups live in, the store's disk); None: none."""
        self.budget = budget
        if mount.launcher:
            interpreter = mount.launcher[-1]
        interpreter = interpreter or python_interpreter()
        self.store = store
        self.zygote = Zygote(
            interpreter,
            "session",
            _sources(),
            interpreter_bind_dirs(interpreter) if mount.host_root else [],
            extra_config={**mount.config, "store": str(store.root)},
            launcher=list(mount.launcher),
        )
        self.interpreter = interpreter
        self.mount = mount
        # Sessions of an environment with packages get a zygote whose root holds them (started
        # on the first such open, the last KEEP_ENVIRONMENTS kept): key -> (zygote, mount).
        self.environment_zygotes: OrderedDict[str, tuple[Zygote, Mount]] = OrderedDict()
        self.layouts = LayoutCache()  # terminal sessions' merged states (sessions/layout.py)
        self.sessions: dict[str, HostedSession] = {}
        self.ended: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id -> (kind, reason)
        self.lock = threading.Lock()
        self.zygote_lock = threading.Lock()

    @property
    def enforcement(self) -> str:
        return "cgroup-v1" if cgroups.available() else "rlimit"

    def start(self) -> None:
        """Start the session zygote (on the thread that will open sessions).

        Raises:
            SandboxSetupFailed, ZygoteDied: as :meth:`Zygote.start`.
        """
        self.zygote.start()

    def restart_zygote(self) -> None:
        """Start a new zygote after the last one died (on the thread that started the host).

        Raises:
            SandboxSetupFailed, ZygoteDied: as :meth:`Zygote.start`.
        """
        with self.zygote_lock:
            self.zygote.stop()
            self.zygote.start()

    def stop(self) -> None:
        """Close every session and stop the zygotes."""
        self.close_all("its sandbox worker stopped")
        self.zygote.stop()
        for zygote, _mount in self.environment_zygotes.values():
            zygote.stop()
        self.environment_zygotes.clear()

    KEEP_ENVIRONMENTS = 4

    def _zygote_for(self, environment: dict | None) -> tuple[Zygote, Mount]:
        """The zygote (and its mount) that opens sessions of ``environment``: the host's own for
        none or for this runtime's bare environment; else one of that environment's, started
        now if it is not running (call under ``zygote_lock``).

        Raises:
            EnvironmentCorrupt: the environment is not built here or differs from its manifest.
            SandboxSetupFailed, ZygoteDied: its zygote could not start.
        """
        own_root = None if self.mount.host_root else self.mount.key
        if not environment or (
            not environment.get("packages") and (environment.get("root") or None) == own_root
        ):
            return self.zygote, self.mount  # this runtime's bare environment
        key = str(environment.get("key"))
        found = self.environment_zygotes.pop(key, None)
        if found is None or not found[0].alive:
            if found is not None:
                found[0].stop()
            mount = mount_for(environment)
            interpreter = mount.launcher[-1] if mount.launcher else self.interpreter
            zygote = Zygote(
                interpreter,
                "session",
                _sources(),
                interpreter_bind_dirs(interpreter) if mount.host_root else [],
                extra_config={**mount.config, "store": str(self.store.root)},
                launcher=list(mount.launcher),
            )
            zygote.start()
            found = (zygote, mount)
            if len(self.environment_zygotes) >= self.KEEP_ENVIRONMENTS:
                _old_key, (oldest, _m) = self.environment_zygotes.popitem(last=False)
                oldest.stop()
        self.environment_zygotes[key] = found
        return found

    def count(self) -> int:
        with self.lock:
            return len(self.sessions)

    # --- open and close --------------------------------------------------------------

    def open(
        self,
        digest: str,
        limits: SessionLimits,
        *,
        load_blob,
        environment: dict | None = None,
        state_dirs: list | None = None,
    ) -> HostedSession:
        """Open a session of the workspace ``digest`` (materialised from ``load_blob()`` if
        this worker does not hold it yet), in ``environment`` (a request's environment field,
        see :mod:`sandboxes.environments`: its root, its packages mounted read-only at ``/env``
        and on ``PYTHONPATH``/``NODE_PATH``; None: this host's runtime alone). ``state_dirs``
        (``[[path, "rw"|"ro"]]``): a terminal session, whose workspace holds a state at
        absolute paths, mounted there (:mod:`sandboxes.sessions.layout`).

        Raises:
            OverBudget: the worker's session budget has no room for it (count, memory, disk).
            ValueError: the blob is missing or is not the workspace ``digest``; a state
                directory that cannot be mounted (``StateLayoutError``, naming it).
            SandboxSetupFailed: the session could not be set up (an ``infra_error``).
            ZygoteDied: the zygote died and could not be restarted.
        """
        mounts = None
        if state_dirs:
            with self.zygote_lock:
                _zygote, mount = self._zygote_for(environment)
            system_root = mount.config.get("system_root")
            merged, mounts = self.layouts.get(
                digest, load_blob, state_dirs, Path(system_root) if system_root else None
            )
            digest = merged.digest

            def load_blob() -> bytes:
                return merged.blob

        budget = self.budget
        if budget is not None:
            budget.admit(limits)
        try:
            self.store.acquire(
                digest, load_blob, room=budget.check_disk if budget is not None else None
            )
        except BaseException:
            if budget is not None:
                budget.release(limits)
            raise
        cgroup = None
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # +2: the session's init and the next call's child, booted ahead. Inside the
            # worker's budget cgroup: all its sessions together stay within the budget.
            cgroup = cgroups.create(
                memory_bytes=limits.memory_bytes,
                processes=limits.processes + 2,
                sweep=False,
                inside=budget.cgroup if budget is not None else None,
            )
            with self.zygote_lock:  # one request and its answer at a time on its socket
                zygote, mount = self._zygote_for(environment)
                request = {"workspace": digest, "limits": _wire_limits(limits, bool(cgroup))}
                if mounts:
                    request["state_dirs"] = mounts
                pid = zygote.start_session(fds={"control": there.detach()}, request=request)
            pidfd = os.pidfd_open(pid)
            if cgroup:
                cgroup.join(pid)  # before it forks: everything of the session is born there
            session_env = {**SESSION_ENV, **mount.config.get("environ", {})}
            _send(here, {"op": "begin", "env": session_env})  # now it may boot the first shell
        except BaseException:
            here.close()
            if cgroup:
                cgroup.remove()
            self.store.release(digest)
            if budget is not None:
                budget.release(limits)
            raise
        now = time.monotonic()
        session = HostedSession(
            id=f"s-{secrets.token_hex(12)}",
            pid=pid,
            pidfd=pidfd,
            control=here,
            cgroup=cgroup,
            limits=limits,
            digest=digest,
            opened_at=now,
            last_used=now,
        )
        with self.lock:
            self.sessions[session.id] = session
        return session

    def close(self, session_id: str, reason: str = "closed by its caller") -> None:
        """Close a session: nothing of it remains (processes, mounts, cgroup, its reference
        to the workspace). Closing a closed or lost session does nothing."""
        with self.lock:
            session = self.sessions.pop(session_id, None)
        if session is None:
            return
        with session.lock:  # after a call in flight, if any
            self._end(session, "closed", reason)

    def close_all(self, reason: str) -> None:
        for session_id in list(self.sessions):
            self.close(session_id, reason)

    def expire(self, now: float | None = None) -> list[str]:
        """Close the sessions past their idle timeout or maximum lifetime (a session in a call
        is left until the call ends); returns their ids."""
        now = time.monotonic() if now is None else now
        closed = []
        with self.lock:
            candidates = list(self.sessions.values())
        for session in candidates:
            limits = session.limits
            if now - session.opened_at >= limits.max_lifetime_s:
                reason = f"its maximum lifetime of {limits.max_lifetime_s:g} s passed"
            elif now - session.last_used >= limits.idle_timeout_s:
                reason = f"it was idle for {limits.idle_timeout_s:g} s (its idle timeout)"
            else:
                continue
            if not session.lock.acquire(blocking=False):
                continue  # in a call: it is not idle, and its lifetime ends after the call
            try:
                with self.lock:
                    self.sessions.pop(session.id, None)
                self._end(session, "expired", f"closed by its lease: {reason}")
            finally:
                session.lock.release()
            closed.append(session.id)
        return closed

    def _end(self, session: HostedSession, kind: str, reason: str) -> None:
        """Tear a session down (its lock held): kill its init (the kernel kills the rest of
        its pid namespace), remove its cgroup, release its workspace."""
        if session.ended:
            return
        session.ended = reason
        with self.lock:
            self.sessions.pop(session.id, None)
            self.ended[session.id] = (kind, reason)
            while len(self.ended) > ENDED_REMEMBERED:
                self.ended.popitem(last=False)
        try:
            _send(session.control, {"op": "close"})
        except OSError:
            pass
        if not _wait_exit(session.pidfd, CLOSE_WAIT_S):
            try:
                signal.pidfd_send_signal(session.pidfd, signal.SIGKILL)
            except OSError:
                pass
            _wait_exit(session.pidfd, CLOSE_WAIT_S)
        session.control.close()
        os.close(session.pidfd)
        if session.cgroup:
            session.cgroup.remove()
        self.store.release(session.digest)
        if self.budget is not None:
            self.budget.release(session.limits)

    @contextlib.contextmanager
    def _using(self, session_id: str):
        """The session for one call (:meth:`_take`); its use recorded, its lock released after."""
        session = self._take(session_id)
        try:
            yield session
        finally:
            session.last_used = time.monotonic()
            session.lock.release()

    def _take(self, session_id: str) -> HostedSession:
        """The session, its lock acquired (released by the caller).

        Raises:
            SessionGone: closed, lost, or never held by this host.
        """
        with self.lock:
            session = self.sessions.get(session_id)
            ended = self.ended.get(session_id)
        if session is None:
            if ended:
                raise SessionGone(session_id, *ended)
            raise SessionGone(
                session_id, "lost", "no such session in this worker slot (its worker restarted?)"
            )
        session.lock.acquire()
        if session.ended:
            session.lock.release()
            raise SessionGone(session_id, *self.ended.get(session_id, ("closed", session.ended)))
        return session

    # --- calls -------------------------------------------------------------------------

    def exec(
        self,
        session_id: str,
        command: str,
        *,
        stdin: bytes | None = None,
        timeout_s: float = 30.0,
        cpu_s: int | None = None,
        env: dict[str, str] | None = None,
        cwd: str = ".",
        output_cap_bytes: int = 64 * 1024,
        output_kill_bytes: int = 8 * 1024**2,
    ) -> R.ExecutionResult:
        """Run ``bash -c command`` in the session (arguments checked by the caller with
        :func:`sandboxes.sessions.limits.check_exec`).

        Returns:
            the call's :class:`ExecutionResult`: ``ok`` (exit 0), ``failed`` (another exit
            code, or a ``cwd`` that is not a directory of the workspace), ``timeout``,
            ``output_limit``, ``memory_limit``, ``crashed`` (a signal, or no process could
            be started within the session's process limit); ``infra_error`` when the
            sandbox itself failed to start the command.

        Raises:
            SessionGone: the session is closed or lost.
        """
        cpu_limit = cpu_s or max(1, int(timeout_s + 0.999))
        with self._using(session_id) as session:
            message = {
                "op": "exec",
                "command": command,
                "env": env or {},  # on top of SESSION_ENV, which its shells start with
                "cwd": cwd,
                "wall_timeout_s": timeout_s,
                "cpu_s": cpu_limit,
                "keep": session.limits.keep_processes,
                "stdin": stdin is not None,
            }
            outcome = self._call(
                session,
                message,
                stdin=stdin,
                cap=output_cap_bytes,
                kill_bytes=output_kill_bytes,
                deadline_s=timeout_s,
            )
            return exec_result(
                outcome, output_cap_bytes, session.cgroup is not None, cpu_s=cpu_limit
            )

    def file_op(self, session_id: str, op: str, args: dict, data: bytes | None = None) -> dict:
        """One file operation of ``harness/session_files.py`` (``read``, ``write``, ``list``,
        ``diff``, ``changes``) in the session, as the sandbox user.

        Returns:
            the operation's result (see that module).

        Raises:
            FileOpRefused: the input was refused (a path outside the workspace, a missing
                file...), or the operation failed inside the session (``kind`` ``failed``).
            SessionGone: the session is closed or lost.
        """
        with self._using(session_id) as session:
            message = {
                "op": "file",
                "file_op": op,
                "args": args,
                "wall_timeout_s": FILE_OP_TIMEOUT_S,
                "cpu_s": int(FILE_OP_TIMEOUT_S),
                "keep": True,  # a file operation never ends what earlier calls left running
                "max_input_bytes": session.limits.workspace_bytes,
            }
            outcome = self._call(
                session,
                message,
                stdin=data if data is not None else None,
                cap=FILE_RESULT_CAP_BYTES,
                kill_bytes=FILE_RESULT_CAP_BYTES,
                deadline_s=FILE_OP_TIMEOUT_S,
            )
        try:
            answer = json.loads(outcome.stdout) if outcome.report.get("exited") else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not ("ok" in answer or "error" in answer):
            report = outcome.report
            stderr = outcome.stderr[-300:].decode("utf-8", "replace")
            why = report.get("error") or (
                "timed out"
                if report.get("timed_out")
                else f"status {report.get('status')}, {stderr}"
            )
            raise FileOpRefused("failed", f"the file operation {op} failed in the session: {why}")
        if "error" in answer:
            error = answer["error"]
            raise FileOpRefused(str(error.get("kind", "invalid")), str(error.get("detail", "")))
        return answer["ok"]

    def _call(
        self,
        session: HostedSession,
        message: dict,
        *,
        stdin: bytes | None,
        cap: int,
        kill_bytes: int,
        deadline_s: float,
    ) -> CallOutcome:
        """Send one call, drain its pipes, return the init's answer and the output.

        A ``file`` call brings its pipes; an ``exec`` gets its shell's pipes back in the
        init's ``started`` answer (the shell was booted with them), or an answer that it
        could not start.

        Raises:
            SessionGone: the init died or did not answer in time (the session is torn down).
        """
        if session.cgroup:
            session.cgroup.reset_peak()
        started = time.monotonic()
        try:
            if message["op"] == "exec":
                _send(session.control, message)
                # (its shell may have been stopped by a process the call's session kept: its
                # init gives up writing the job at the call's wall clock, then answers)
                reply, fds = receive_with_fds(session.control, deadline_s + ANSWER_GRACE_S)
                if "started" not in reply:  # could not start: this is its answer
                    return unstarted(reply, started)
                named = dict(zip(reply["fds"], fds, strict=True))
                out_r, err_r, in_w = named["stdout"], named["stderr"], named.get("stdin")
            else:
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                sent = {"stdout": out_w, "stderr": err_w}
                in_w = None
                if stdin is not None:
                    in_r, in_w = os.pipe()
                    sent["stdin"] = in_r
                try:
                    _send(session.control, dict(message, fds=list(sent)), list(sent.values()))
                finally:
                    for fd in sent.values():
                        os.close(fd)
        except (OSError, ValueError, InitGone) as exc:
            self._lose(session, f"its init did not take the call ({exc})")
        try:
            report, streams, flooded = drain(
                session, out_r, err_r, in_w, stdin, cap=cap, kill_bytes=kill_bytes,
                deadline=started + deadline_s + ANSWER_GRACE_S,
            )  # fmt: skip
        except InitGone as exc:
            self._lose(session, str(exc))
        wall_ms = (time.monotonic() - started) * 1000
        peak = hit = 0
        if session.cgroup:
            peak = session.cgroup.peak_memory_bytes()
            hit = session.cgroup.memory_limit_hit()
        else:
            peak = int(report.get("maxrss_kb") or 0) * 1024
        return CallOutcome(
            report=report,
            stdout=bytes(streams["stdout"][0]),
            stderr=bytes(streams["stderr"][0]),
            stdout_total=streams["stdout"][1],
            stderr_total=streams["stderr"][1],
            flooded=flooded,
            wall_ms=wall_ms,
            peak_memory_bytes=peak,
            memory_limit_hit=bool(hit),
        )

    def _lose(self, session: HostedSession, why: str):
        """Tear down a session whose init failed (its lock held) and raise ``lost``."""
        log.warning("session %s lost: %s", session.id, why)
        self._end(session, "lost", why)
        raise SessionGone(session.id, "lost", why)


def _wait_exit(pidfd: int, seconds: float) -> bool:
    """True once the process behind ``pidfd`` has exited (within ``seconds``)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(int(seconds * 1000)))


def _wire_limits(limits: SessionLimits, cgroup: bool) -> dict:
    """The limits the session's init applies itself (see ``harness/session_init.py``)."""
    return {
        "workspace_bytes": limits.workspace_bytes,
        "workspace_inodes": limits.workspace_inodes,
        "tmp_bytes": limits.tmp_bytes,
        "shm_bytes": limits.shm_bytes,
        # With a cgroup holding memory and processes, no per-process rlimit stands in the way
        # of tools that reserve address space (V8, the JVM); without one, they are the limit.
        "address_space_bytes": 0 if cgroup else limits.memory_bytes,
        "rlimit_processes": 0 if cgroup else limits.processes,
    }
