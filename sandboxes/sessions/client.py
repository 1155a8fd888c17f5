"""The Python client of sandbox sessions: what a rollout calls (README, "Sandbox sessions").

    workspace = Workspace.from_files({"solution.py": prompt})   # or Workspace.from_directory(repo)
    with open_session(workspace) as session:
        result = session.exec("python -m unittest -q", timeout_s=60)   # an ExecutionResult
        session.write("solution.py", new_text)
        text = session.read_text("solution.py")
        patch = session.diff()
        changes = session.changes()                                  # for grading (grading.py)

Calls travel over the sandbox queue's Redis (``routing.py``): :func:`open_session` uploads
the workspace's blob once (content-addressed), picks the live session slot of the
runtime that holds the fewest sessions and asks it to open one; every later call goes to
that slot and no other. While it waits, the client watches the slot's heartbeat.

Errors. A session that can no longer be reached through no fault of the caller (its
worker died or restarted, its processes died, its lease closed it, no worker answers) is
*lost*: ``exec`` then returns an :class:`ExecutionResult` with status ``infra_error`` and a
``detail`` naming the session, and the file operations raise :class:`SessionLost` (also
``status == "infra_error"``). Rollouts flag such a trajectory and never score it. Input the
session refuses raises :class:`SessionError` (``kind``: ``invalid``, ``outside``,
``not_a_file``, ``exists``, ``too_large``, ``failed``) or :class:`SessionFileNotFound`; a
call on a session the caller closed raises :class:`SessionClosed`. An open that no worker had
room for (its session budget: count, memory, disk) raises :class:`SessionRefused`.
"""

from __future__ import annotations

import base64
import json
import random
import time
import uuid
from dataclasses import dataclass, field

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.sessions import routing
from sandboxes.sessions.grading import WorkspaceChanges
from sandboxes.sessions.limits import SessionLimits, check_exec
from sandboxes.sessions.workspace import Workspace

CALL_GRACE_S = 30.0  # an answer may come this long after a call's own time limit
FILE_CALL_WAIT_S = 90.0
OPEN_ATTEMPTS = 3  # an open whose slot died before answering is tried on another
INLINE_UPLOAD_BYTES = 64 * 1024  # smaller blobs ride with the open itself (SET NX)
NO_SLOT_WAIT_S = 20.0


class SessionError(Exception):
    """A session call was refused or failed.

    Attributes:
        kind: what happened (see the module).
        detail: the worker's words.
        session_id: the session, when there was one.
    """

    def __init__(self, kind: str, detail: str, session_id: str | None = None) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.session_id = kind, detail, session_id


class SessionLost(SessionError):
    """The session cannot be reached through no fault of the caller: an ``infra_error``."""

    status = R.INFRA_ERROR


class SessionRefused(SessionLost):
    """The worker had no room for another session: its count, memory or disk budget
    (``kind`` ``capacity``; the detail names the limit and its setting). An infrastructure
    condition, like a lost session: a rollout drops the trajectory, never scores it."""


class SessionClosed(SessionError):
    """The caller closed this session already."""


class SessionFileNotFound(SessionError, FileNotFoundError):
    """The path names nothing in the workspace."""


def _error(error: dict, session_id: str | None) -> SessionError:
    kind, detail = str(error.get("kind", "lost")), str(error.get("detail", ""))
    if kind in ("lost", "expired"):
        return SessionLost(kind, detail, session_id)
    if kind == "capacity":
        return SessionRefused(kind, detail, session_id)
    if kind == "closed":
        return SessionClosed(kind, detail, session_id)
    if kind == "not_found":
        return SessionFileNotFound(kind, detail, session_id)
    return SessionError(kind, detail, session_id)


@dataclass(frozen=True)
class WorkspaceState:
    """What :meth:`Session.state` saw.

    Attributes:
        changes: every path that differs from the start: ``{path: (change, mode, sha256)}``
            (``change`` ``added``, ``deleted`` or ``modified``, re-permissioning included;
            ``mode`` the permission bits, None for a deleted path; ``sha256`` of the content or
            a link's target, None where deleted or unreadable).
        network: the session's own counters since it opened: ``no_route`` (packets that could
            not leave: a DNS lookup or a connection out), ``udp_no_port`` (datagrams to a local
            port nothing listens on).
    """

    changes: dict = field(default_factory=dict)
    network: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FileEntry:
    """One entry of :meth:`Session.list`: ``type`` ``file``, ``dir``, ``symlink`` or ``other``;
    ``size`` in bytes; ``mode`` the permission bits."""

    path: str
    type: str
    size: int
    mode: int


def _send_and_wait(client, slot: str, calls: list[dict], *, wait_s: float, extra=None) -> list:
    """Push ``calls`` to ``slot``'s inbox and wait for every answer (in order).

    ``extra(pipe)`` adds commands in front of the push, in the same round trip.

    Returns:
        each answer (``{"ok": ...}`` or ``{"error": ...}``); a call the slot did not
        answer (it died, or ``wait_s`` passed) gets ``{"error": {"kind": "lost"}}``.
    """
    reply_to = f"{Q.PREFIX}:reply:session:{uuid.uuid4().hex}"
    messages = []
    for index, call in enumerate(calls):
        messages.append(json.dumps(dict(call, id=str(index), reply_to=reply_to)))
    pipe = client.pipeline(transaction=False)
    if extra is not None:
        extra(pipe)
    for message in messages:
        pipe.lpush(routing.calls_key(slot), message)
    pipe.blpop([reply_to], timeout=1)
    popped = pipe.execute()[-1]
    answers: list = [None] * len(calls)
    waiting = len(calls)
    deadline = time.monotonic() + wait_s
    while True:
        if popped is not None:
            answer = json.loads(popped[1])
            index = int(answer.get("id", -1))
            if 0 <= index < len(answers) and answers[index] is None:
                answers[index] = answer
                waiting -= 1
            if not waiting:
                return answers
        elif not client.exists(Q.alive_key(slot)) or time.monotonic() > deadline:
            why = (
                f"no answer within {wait_s:.0f} s from its sandbox worker slot {slot}"
                if client.exists(Q.alive_key(slot))
                else None
            )
            for index, message in enumerate(messages):
                if answers[index] is None:
                    client.lrem(routing.calls_key(slot), 1, message)  # if nobody took it yet
                    session = calls[index].get("session")
                    detail = (
                        f"session {session} was lost: {why}" if why and session else why
                    ) or routing.lost_detail(slot, session)
                    answers[index] = {"error": {"kind": "lost", "detail": detail}}
            client.delete(reply_to)
            return answers
        popped = client.blpop([reply_to], timeout=1)


def _choose_slots(client, runtime: str, count: int, timeout_s: float) -> list[str]:
    """``count`` slots of ``runtime`` to open sessions on, the least loaded first (each pick
    is counted at once, so a group spreads over the slots).

    Raises:
        SessionLost: no live session slot appeared within ``timeout_s`` (at most 20 s).
    """
    deadline = time.monotonic() + min(timeout_s, NO_SLOT_WAIT_S)
    slots = routing.live_slots(runtime, client)
    while not slots:
        if time.monotonic() > deadline:
            raise SessionLost(
                "lost",
                f"no live sandbox session slot for {runtime}; start one with "
                f"`python manage.py sandbox_worker --runtime {runtime}`",
            )
        time.sleep(0.2)
        slots = routing.live_slots(runtime, client)
    chosen = []
    for _ in range(count):
        least = min(slots.values())
        slot = random.choice(sorted(s for s, n in slots.items() if n == least))
        slots[slot] += 1
        chosen.append(slot)
    pipe = client.pipeline(transaction=False)
    for slot in chosen:
        pipe.incr(routing.load_key(slot))  # the slot writes its true count back on open
    pipe.execute()
    return chosen


def open_sessions(
    workspace: Workspace,
    count: int,
    *,
    limits: SessionLimits | None = None,
    runtime: str = "python",
    timeout_s: float = 60.0,
    slot: str | None = None,
    environment: dict | None = None,
    state_dirs: list | None = None,
) -> list[Session]:
    """Open ``count`` sessions of one workspace at once (a group of rollouts of one task):
    the blob is uploaded once and each worker materialises it once.

    Args:
        workspace: the starting files (:class:`Workspace`).
        count: how many sessions.
        limits: each session's limits (default :class:`SessionLimits`).
        runtime: the pool of session slots to use (``sandbox_worker --runtime``).
        timeout_s: how long to wait for the slots' answers.
        slot: open them all on this slot (tests, debugging); default: least loaded.
        environment: the task version's built environment (``Materialised.request_field()``):
            its packages mounted in each session; its ``queue`` is the pool used unless
            ``runtime`` is given otherwise. None: the runtime alone.
        state_dirs: ``[[path, "rw"|"ro"]]``: a terminal session, whose ``workspace`` holds its
            state at absolute paths (``app/data.csv`` is ``/app/data.csv``), each directory
            mounted at its path (:mod:`sandboxes.sessions.layout`); None: a ``/workspace``.

    Returns:
        the sessions, in order.

    Raises:
        SessionRefused: the workers tried had no room (their session budgets; after
            ``OPEN_ATTEMPTS`` tries, the last refusal).
        SessionLost: no slot could open them (the detail says why; an ``infra_error``).
        SessionError: the worker refused the workspace or the limits (``invalid``).
        ValueError: ``count`` below 1.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    limits = limits or SessionLimits()
    client = Q.connection()
    inline = len(workspace.blob) <= INLINE_UPLOAD_BYTES
    key = routing.workspace_key(workspace.digest)
    if not inline and not client.expire(key, routing.WORKSPACE_TTL_S):
        client.set(key, workspace.blob, ex=routing.WORKSPACE_TTL_S)

    def upload(pipe) -> None:
        if inline:
            pipe.set(key, workspace.blob, ex=routing.WORKSPACE_TTL_S, nx=True)

    call = {"op": "open", "workspace": workspace.digest, "limits": limits.to_dict()}
    if state_dirs:
        call["state_dirs"] = [list(entry) for entry in state_dirs]
    if environment:
        call["environment"] = environment
        if runtime == "python" and environment.get("queue"):
            runtime = environment["queue"]
    sessions: list[Session | None] = [None] * count
    last: SessionError | None = None
    for _attempt in range(OPEN_ATTEMPTS):
        missing = [i for i, s in enumerate(sessions) if s is None]
        if not missing:
            break
        slots = [slot] * len(missing) if slot else _choose_slots(
            client, runtime, len(missing), timeout_s
        )  # fmt: skip
        by_slot: dict[str, list[int]] = {}
        for index, chosen in zip(missing, slots, strict=False):
            by_slot.setdefault(chosen, []).append(index)
        for chosen, indices in by_slot.items():
            answers = _send_and_wait(
                client, chosen, [call] * len(indices), wait_s=timeout_s, extra=upload
            )
            for index, answer in zip(indices, answers, strict=False):
                if "ok" in answer:
                    sessions[index] = Session(answer["ok"], runtime, workspace, limits)
                    continue
                last = _error(answer["error"], None)
                if not isinstance(last, SessionLost):
                    for opened in sessions:
                        if opened is not None:
                            opened.close()
                    raise last
    if any(s is None for s in sessions):
        for opened in sessions:
            if opened is not None:
                opened.close()
        raise last or SessionLost("lost", "no sandbox slot opened the session")
    return sessions  # type: ignore[return-value]


def open_session(
    workspace: Workspace,
    *,
    limits: SessionLimits | None = None,
    runtime: str = "python",
    timeout_s: float = 60.0,
    slot: str | None = None,
    environment: dict | None = None,
    state_dirs: list | None = None,
) -> Session:
    """Open one session (see :func:`open_sessions`, whose arguments and errors it shares)."""
    return open_sessions(
        workspace,
        1,
        limits=limits,
        runtime=runtime,
        timeout_s=timeout_s,
        slot=slot,
        environment=environment,
        state_dirs=state_dirs,
    )[0]


class Session:
    """An open session (from :func:`open_session`); a context manager that closes it.

    Attributes:
        id: the session's id (never shown to a policy: the environment fills it in).
        slot: the worker slot that holds it; every call goes there.
        workspace: what it started from.
        limits: its :class:`SessionLimits`.
        enforcement: ``cgroup-v1`` or ``rlimit`` (what holds its memory and processes).
        pid: its init's pid on the worker's host (tests and debugging).
        cgroup: its cgroup's name on that host, or ``""``.
    """

    def __init__(self, info: dict, runtime: str, workspace: Workspace, limits: SessionLimits):
        self.id = str(info["session"])
        self.slot = str(info["slot"])
        self.runtime = runtime
        self.workspace = workspace
        self.limits = limits
        self.enforcement = str(info.get("enforcement", ""))
        self.pid = int(info.get("pid", 0))
        self.cgroup = str(info.get("cgroup", ""))
        self.closed = False

    def __repr__(self) -> str:
        return f"<Session {self.id} on {self.slot}{' closed' if self.closed else ''}>"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def _call(self, op: str, args: dict, *, wait_s: float):
        if self.closed:
            raise SessionClosed("closed", f"session {self.id} was closed by its caller", self.id)
        call = {"op": op, "session": self.id, "args": args}
        answer = _send_and_wait(Q.connection(), self.slot, [call], wait_s=wait_s)[0]
        if "error" in answer:
            raise _error(answer["error"], self.id)
        return answer["ok"]

    def exec(
        self,
        command: str,
        *,
        stdin: str | bytes | None = None,
        timeout_s: float = 30.0,
        cpu_s: int | None = None,
        env: dict[str, str] | None = None,
        cwd: str = ".",
        output_cap_bytes: int = 64 * 1024,
    ) -> R.ExecutionResult:
        """Run ``bash -c command`` in the session: a fresh process in its namespaces, as the
        sandbox user, in ``cwd`` (relative to the workspace), with ``env`` added to the
        session's environment (``PATH``, ``HOME=/tmp``, ``LANG``...).

        Args:
            stdin: the command's standard input (text is sent as UTF-8); default: empty.
            timeout_s: wall-clock seconds before every process of the call is killed.
            cpu_s: CPU seconds of each of its processes (``RLIMIT_CPU``); default: ``timeout_s``.
            output_cap_bytes: bytes kept of stdout and of stderr (``truncated`` says when more
                came; past 8 MiB together the call is killed: ``output_limit``).

        Returns:
            an :class:`ExecutionResult` (``ok`` when it exited 0, ``failed`` with another exit
            code, ``timeout``, ``output_limit``, ``memory_limit``, ``crashed``; wall and CPU
            milliseconds, peak memory in bytes); ``infra_error`` when the session was lost
            (``detail`` names it).

        Raises:
            ValueError: a bad argument (named).
            SessionClosed: the caller closed the session already.
        """
        check_exec(
            command, timeout_s=timeout_s, cpu_s=cpu_s, env=env, output_cap_bytes=output_cap_bytes
        )
        if isinstance(stdin, str):
            stdin = stdin.encode("utf-8")
        args = {
            "command": command,
            "timeout_s": timeout_s,
            "cpu_s": cpu_s,
            "env": env or {},
            "cwd": cwd,
            "output_cap_bytes": output_cap_bytes,
            "stdin": base64.b64encode(stdin).decode("ascii") if stdin is not None else None,
        }
        try:
            answer = self._call("exec", args, wait_s=timeout_s + CALL_GRACE_S)
        except SessionLost as exc:
            return R.ExecutionResult(status=R.INFRA_ERROR, detail=exc.detail)
        except SessionError as exc:
            if exc.kind == "invalid":
                raise ValueError(exc.detail) from None
            raise
        return R.ExecutionResult.from_dict(answer)

    def read(self, path: str, *, max_bytes: int = 16 * 1024**2, truncate: bool = False) -> bytes:
        """The content of a regular file of the workspace.

        Args:
            path: relative to the workspace (or under ``/workspace/``).
            max_bytes: the most bytes returned.
            truncate: return the first ``max_bytes`` of a larger file instead of refusing it.

        Raises:
            SessionFileNotFound: no such file.
            SessionError: ``outside`` (the path, or a link on it, leaves the workspace),
                ``not_a_file``, ``too_large`` (larger than ``max_bytes``, without ``truncate``).
            SessionLost, SessionClosed: see the module.
        """
        answer = self._call("read", {"path": path, "max_bytes": max_bytes}, wait_s=FILE_CALL_WAIT_S)
        if answer["truncated"] and not truncate:
            raise SessionError(
                "too_large", f"{path!r} has {answer['size']} bytes, over max_bytes", self.id
            )
        return base64.b64decode(answer["data"])

    def read_text(self, path: str, **options) -> str:
        """:meth:`read`, decoded as UTF-8 (undecodable bytes replaced)."""
        return self.read(path, **options).decode("utf-8", "replace")

    def write(self, path: str, content: str | bytes, *, executable: bool | None = None) -> int:
        """Create or replace a file of the workspace (and its missing parent directories).

        Args:
            executable: make it mode 0755 (True) or 0644 (False); None keeps an existing
                file's mode (0644 for a new one).

        Returns:
            the bytes written.

        Raises:
            SessionError: ``outside``, ``not_a_file`` (a directory is there), ``too_large``
                (the workspace's size cap), ``invalid``.
            SessionLost, SessionClosed: see the module.
        """
        if isinstance(content, str):
            content = content.encode("utf-8")
        args = {
            "path": path,
            "executable": executable,
            "data": base64.b64encode(content).decode("ascii"),
        }
        return int(self._call("write", args, wait_s=FILE_CALL_WAIT_S)["size"])

    def list(
        self, path: str = ".", *, recursive: bool = False, max_entries: int = 10_000
    ) -> list[FileEntry]:
        """The entries of a directory of the workspace (links listed, never followed), sorted.

        Raises:
            SessionFileNotFound, SessionError (``outside``, ``too_large`` past 200,000
            entries), SessionLost, SessionClosed.
        """
        args = {"path": path, "recursive": recursive, "max_entries": max_entries}
        answer = self._call("list", args, wait_s=FILE_CALL_WAIT_S)
        return [FileEntry(**entry) for entry in answer["entries"]]

    def diff(self, *, max_bytes: int = 1024**2, context: int = 3) -> str:
        """A unified diff of the workspace against its start (``--- a/p``, ``+++ b/p``,
        ``/dev/null`` for an added or deleted file; binary and large files named only),
        cut at ``max_bytes``.

        Raises:
            SessionLost, SessionClosed: see the module.
        """
        args = {"max_bytes": max_bytes, "context": context}
        return str(self._call("diff", args, wait_s=FILE_CALL_WAIT_S)["diff"])

    def changes(self, *, max_bytes: int = 64 * 1024**2) -> WorkspaceChanges:
        """What changed since the start, in full, for grading (:mod:`sandboxes.sessions.grading`).

        Raises:
            SessionError: ``too_large`` (the changed files hold more than ``max_bytes``),
                ``unreadable`` (the session made a changed file unreadable: ungradable).
            SessionLost, SessionClosed: see the module.
        """
        answer = self._call("changes", {"max_bytes": max_bytes}, wait_s=FILE_CALL_WAIT_S)
        return WorkspaceChanges(
            files={p: base64.b64decode(d) for p, d in answer["files"].items()},
            executable=frozenset(answer["executable"]),
            symlinks=dict(answer["symlinks"]),
            deleted=tuple(answer["deleted"]),
        )

    def state(self) -> WorkspaceState:
        """The workspace and the network as they are now (:class:`WorkspaceState`); two states
        taken apart say what happened between them, whatever command did it.

        Raises:
            SessionLost, SessionClosed: see the module.
        """
        answer = self._call("state", {}, wait_s=FILE_CALL_WAIT_S)
        return WorkspaceState(
            changes={path: tuple(entry) for path, entry in answer["changes"].items()},
            network=dict(answer.get("network") or {}),
        )

    def close(self) -> None:
        """Close the session: its processes, mounts, cgroup and files are gone. Idempotent;
        closing a lost session does nothing."""
        if self.closed:
            return
        self.closed = True
        call = {"op": "close", "session": self.id}
        _send_and_wait(Q.connection(), self.slot, [call], wait_s=FILE_CALL_WAIT_S)
