"""Terminal sessions: a task's state on its root, its services started, and its verifier run on
a final state in a fresh session (Harbor's contract: ``bash /tests/test.sh`` writes a reward to
``/logs/verifier/reward.txt``, or ``reward.json`` with a ``reward`` key).

- :func:`open_terminal_session`: a session whose workspace holds a state at absolute paths,
  each state directory mounted writable at its path (:mod:`sandboxes.sessions.layout`), extra
  read-only directories beside it (``/solution`` when validating, ``/tests`` when grading), and
  the task's services started, kept running for the session's life.
- :func:`run_verifier`: a fresh session on the final state with the task's ``tests/`` at
  ``/tests`` (read-only, never in the agent's session) and an empty ``/logs/verifier``; the
  services started again from that state; then ``test.sh`` in the working directory.

What the final state may hold is hostile. The verifier's process gets a fixed environment:
the system's ``PATH`` only, a fresh ``HOME`` on ``/tmp``, ``PYTHONSAFEPATH`` (no working
directory on ``sys.path``: a ``pytest.py`` left in ``/app`` is not imported) and no user site.
The services (the agent's configuration, maybe its code) run under a Landlock ruleset that lets
them write only to the state directories and ``/tmp``, and read nothing of ``/tests``, ``/logs``
or ``/workspace``: they cannot write the reward, nor read the expected answers. When ``test.sh``
ends, every process of the session is killed before the reward is read. A verifier that runs the
agent's code itself (a cron job's script) runs it as its own user, with no such wall unless it
asks for one: ``/crucible/bin/confine 'COMMAND'`` (mounted read-only when grading) runs a
command under the services' ruleset; the shipped system-operations verifiers also stop the other
processes of their account and remove the reward file before writing theirs. Where the kernel
has no Landlock the services run without it, and the outcome says so (``isolation``). Only the
state directories' files of the state passed in reach the grading session (the caller's final
state, ``tasks_library.terminal.state.final_state``, keeps only those already).
"""

from __future__ import annotations

import json
import math
import shlex
import time
from dataclasses import dataclass, field, replace

from sandboxes import result as R
from sandboxes.sessions.client import (
    Session,
    SessionError,
    SessionFileNotFound,
    SessionLost,
    open_session,
)
from sandboxes.sessions.layout import in_state_dirs
from sandboxes.sessions.limits import SessionLimits
from sandboxes.sessions.workspace import Workspace

REWARD_FILES = ("logs/verifier/reward.txt", "logs/verifier/reward.json")
SERVICE_LOG = "/tmp/crucible-service-{index}.log"
VERIFIER_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "PYTHONSAFEPATH": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "TEST_DIR": "/tests",
}
OUTPUT_TAIL_CHARS = 8000
# What a landlocked service may not even read: the verifier's files, its reward, and the
# workspace the state directories are bound from (which holds the tests too).
HIDDEN_FROM_SERVICES = ("/tests", "/logs", "/workspace")
OUTPUT_TEST_CHARS = 4000  # of it kept on the grading's one test (the replay shows it)

# Run as ``python3 -I -S landlock.py WRITABLE... -- HIDDEN... -- COMMAND`` (from ``/crucible/lib``,
# by ``/crucible/bin/confine``: :data:`CONFINE`): restrict this process (and all it starts) with
# Landlock (ABI 1 and up) to writing only under the WRITABLE trees and to reading and running
# only what lies outside the HIDDEN top-level directories, then exec ``bash -c COMMAND``. Prints
# ``landlock:none`` on stderr and execs anyway where the kernel has no Landlock.
LANDLOCK = r"""
import ctypes, os, sys
args = sys.argv[1:]
first = args.index("--")
second = args.index("--", first + 1)
writable, hidden, command = args[:first], set(args[first + 1:second]), args[second + 1]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
abi = libc.syscall(444, None, 0, 1)
if abi < 1:
    sys.stderr.write("landlock:none\n")
else:
    read = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read a file, read a directory
    write = 0
    for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12):
        write |= 1 << bit
    if abi >= 2:
        write |= 1 << 13
    if abi >= 3:
        write |= 1 << 14
    attr = ctypes.c_uint64(read | write)
    ruleset = libc.syscall(444, ctypes.byref(attr), 8, 0)
    if ruleset < 0:
        raise SystemExit("landlock: cannot create a ruleset")
    class Beneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]
    def allow(path, access):  # directories only (/ holds nothing else a service needs)
        try:
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return
        rule = Beneath(access, fd)
        if libc.syscall(445, ruleset, 1, ctypes.byref(rule), 0) != 0:
            raise SystemExit(f"landlock: cannot allow {path}")
        os.close(fd)
    for name in os.listdir("/"):
        if "/" + name not in hidden:
            allow("/" + name, read)
    for path in writable:
        allow(path, read | write)
    libc.prctl(38, 1, 0, 0, 0)
    if libc.syscall(446, ruleset, 0) != 0:
        raise SystemExit("landlock: cannot restrict this process")
os.execv("/bin/bash", ["bash", "-c", command])
"""


@dataclass
class VerifierOutcome:
    """What a verifier run found.

    Attributes:
        status: ``ok`` (a reward was written and read), ``failed`` (none, or not a number in
            [0, 1]), ``timeout`` (``test.sh`` ran past the verifier's limit), ``infra_error``
            (the session was lost or could not open: not the agent's doing).
        reward: in [0, 1]; 0 unless ``status`` is ``ok``.
        output: the tail of ``test.sh``'s stdout and stderr.
        detail: why, where ``status`` is not ``ok``.
        isolation: how the services were held off the verifier's files: ``landlock``, or
            ``none`` (the kernel has no Landlock), or ``""`` (no services).
        services: per service ``{"command", "log"}`` (its output's tail).
        wall_ms: the whole run.
    """

    status: str
    reward: float = 0.0
    output: str = ""
    detail: str = ""
    isolation: str = ""
    services: list[dict] = field(default_factory=list)
    wall_ms: float = 0.0

    def as_result(self) -> R.ExecutionResult:
        """The outcome as the rewards' :class:`ExecutionResult`: one test, ``verifier``, passed
        at reward 1, scored with the reward (partial credit), its ``output`` the tail of what
        the verifier printed (the probe's answer, pytest's report)."""
        status = (
            self.status
            if self.status in (R.INFRA_ERROR, R.TIMEOUT)
            else (R.OK if self.status == "ok" and self.reward >= 1.0 else R.FAILED)
        )
        return R.ExecutionResult(
            status=status,
            stdout=self.output,
            wall_ms=self.wall_ms,
            tests=[
                R.TestResult(
                    id="verifier",
                    passed=self.status == "ok" and self.reward >= 1.0,
                    error=self.detail,
                    score=self.reward,
                    output=self.output[-OUTPUT_TEST_CHARS:],
                )
            ],
            detail=self.detail,
        )


def state_workspace(
    state: dict[str, bytes],
    executable,
    *,
    extra: dict[str, dict[str, bytes]] | None = None,
    empty_dirs: tuple[str, ...] = (),
) -> Workspace:
    """The workspace of a state (paths without the leading ``/``), with ``extra``
    (``{"/tests": {path: bytes}}``) added under those directories, their ``#!`` files
    executable, and ``empty_dirs`` (absolute) made."""
    files = dict(state)
    runnable = {p for p in executable if p in files}
    for top, tree in (extra or {}).items():
        for rel, data in tree.items():
            path = f"{top.strip('/')}/{rel}"
            files[path] = data
            if data.startswith(b"#!"):
                runnable.add(path)
    workspace = Workspace.from_files(files, executable=runnable)
    if not empty_dirs:
        return workspace
    from sandboxes.sessions.workspace import Entry  # noqa: PLC0415 (one use)

    have = {e.path for e in workspace.entries}
    more = []
    for directory in empty_dirs:
        rel = directory.strip("/")
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            if path not in have:
                have.add(path)
                more.append(Entry(path, "dir", 0o755))
    return Workspace([*workspace.entries, *more])


def open_terminal_session(
    workspace: Workspace,
    *,
    state_dirs,
    read_only=(),
    verifier_dirs=(),
    services=(),
    workdir: str,
    env: dict | None = None,
    environment: dict | None = None,
    runtime: str = "python",
    limits: SessionLimits | None = None,
    landlocked: bool = False,
) -> tuple[Session, list[dict], str]:
    """Open a terminal session and start ``services`` in it.

    Args:
        workspace: the state (:func:`state_workspace`).
        state_dirs: the writable directories (absolute).
        read_only: more directories of the workspace mounted read-only (``/tests``).
        verifier_dirs: directories mounted writable that landlocked services may not write
            (``/logs``: the verifier's reward).
        services: shell commands, each started detached in ``workdir`` with ``env``.
        landlocked: start the services under the Landlock ruleset (grading: see the module),
            through ``/crucible/bin/confine``: ``/crucible`` (:func:`confine_tool`) must be among
            ``read_only``.
        limits: the session's; processes are always kept (services live between calls).

    Returns:
        ``(session, [{"command", "log"}], isolation)``.

    Raises:
        SessionError: as :func:`sandboxes.sessions.open_session` (a bad state directory:
            ``invalid``; no slot: ``lost``).
    """
    if landlocked and "/crucible" not in read_only:
        raise ValueError("landlocked services run through /crucible/bin/confine: mount it")
    limits = limits or SessionLimits(idle_timeout_s=300.0, max_lifetime_s=3600.0)
    if not limits.keep_processes:
        limits = replace(limits, keep_processes=True)
    mounts = [[d, "rw"] for d in sorted({*state_dirs, *verifier_dirs})]
    mounts += [[d, "ro"] for d in sorted(read_only)]
    session = open_session(
        workspace,
        runtime=runtime,
        environment=environment,
        state_dirs=mounts,
        limits=limits,
    )
    try:
        started, isolation = start_services(
            session,
            services,
            workdir=workdir,
            env=env,
            confined=landlocked,
        )
    except SessionError:
        session.close()
        raise
    return session, started, isolation


CONFINE = """#!/bin/bash
# /crucible/bin/confine 'COMMAND': run COMMAND (one string, as bash -c reads it) under the ruleset
# the task's services run under at grading: it may write only to the task's state directories,
# /tmp and /dev, and read nothing of /tests, /logs or /workspace. A verifier runs the agent's own
# code (a cron job's script, a hook) through it, so that code cannot write the reward.
if [ $# -ne 1 ]; then echo "usage: confine 'COMMAND'" >&2; exit 2; fi
exec /usr/bin/python3 -I -S /crucible/lib/landlock.py {writable} -- {hidden} -- "$1"
"""


def confine_tool(state_dirs) -> dict[str, bytes]:
    """The files mounted read-only at ``/crucible`` when grading: ``bin/confine`` (see
    :data:`CONFINE`) and the Landlock launcher it runs."""
    writable = " ".join(shlex.quote(d) for d in [*sorted(state_dirs), "/tmp", "/dev"])
    script = CONFINE.replace("{writable}", writable).replace(
        "{hidden}", " ".join(HIDDEN_FROM_SERVICES)
    )
    return {"bin/confine": script.encode(), "lib/landlock.py": LANDLOCK.encode()}


def start_services(
    session: Session, services, *, workdir: str, env: dict | None, confined: bool = False
) -> tuple[list[dict], str]:
    """Start each of ``services`` detached in ``session`` (which keeps processes), in
    ``workdir`` with ``env``; ``confined``: through ``/crucible/bin/confine`` (mounted in the
    session: :func:`confine_tool`), under the Landlock ruleset that lets them write only to the
    state directories, ``/tmp`` and ``/dev`` and read nothing of :data:`HIDDEN_FROM_SERVICES`.

    Returns:
        ``([{"command", "log"}], isolation)``: ``landlock``, ``none`` (asked, but the kernel has
        no Landlock) or ``""`` (not asked, or no services).

    Raises:
        SessionError: the session refused the call or was lost.
    """
    started: list[dict] = []
    if not services:
        return started, ""
    lines = []
    for index, command in enumerate(services):
        log = SERVICE_LOG.format(index=index)
        launcher = "/crucible/bin/confine" if confined else "bash -c"
        launcher = f"{launcher} {shlex.quote(command)}"
        lines.append(f"setsid {launcher} > {log} 2>&1 < /dev/null &")
        started.append({"command": command, "log": log})
    session.exec("\n".join(lines), cwd=workdir, env=env or {}, timeout_s=30.0)
    isolation = ""
    if confined:
        isolation = "landlock"
        for service in started:
            if "landlock:none" in _read(session, service["log"], 200):
                isolation = "none"
    return started, isolation


def _read(session: Session, path: str, limit: int) -> str:
    """A file of the session by absolute path (the workspace holds state dirs by path); ``""``
    where it cannot be read."""
    try:
        done = session.exec(f"head -c {limit} {shlex.quote(path)}", timeout_s=10.0)
    except SessionError:
        return ""
    return done.stdout if done.status == R.OK else ""


def read_reward(session: Session) -> tuple[float | None, str]:
    """``(reward, "")`` from the verifier's reward file, or ``(None, why)``: ``reward.txt``,
    else, only where there is no ``reward.txt`` at all, ``reward.json`` (a ``reward.txt`` that
    cannot be read, a directory say, is no reward: never a reason to read the other)."""
    for path in REWARD_FILES:
        try:
            data = session.read(path, max_bytes=64 * 1024)
        except SessionLost:
            raise
        except SessionFileNotFound:
            continue
        except SessionError as exc:
            return None, f"/{path} cannot be read as a file: {exc}"
        text = data.decode("utf-8", "replace").strip()
        try:
            if path.endswith(".json"):
                parsed = json.loads(text)
                value = float(parsed["reward"] if isinstance(parsed, dict) else parsed)
            else:
                value = float(text.split()[0]) if text else float("nan")
        except (ValueError, KeyError, TypeError, IndexError):
            return None, f"/{path} does not hold a number: {text[:200]!r}"
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            return None, f"/{path} holds {value!r}, not a reward in [0, 1]"
        return value, ""
    return None, "the verifier wrote no reward (/logs/verifier/reward.txt or reward.json)"


def run_verifier(
    state: dict[str, bytes],
    *,
    executable,
    state_dirs,
    tests: dict[str, bytes],
    workdir: str,
    env: dict | None = None,
    services=(),
    timeout_s: float,
    environment: dict | None = None,
    runtime: str = "python",
) -> VerifierOutcome:
    """Run ``tests/test.sh`` on ``state`` in a fresh session (see the module).

    Args:
        state: the final state (``{path without the leading /: bytes}``).
        executable: its executable paths.
        state_dirs: the task's state directories (absolute).
        tests: the task's ``tests/`` files (``test.sh`` among them).
        timeout_s: the verifier's limit (``[verifier] timeout_sec``), seconds.

    Returns:
        the :class:`VerifierOutcome` (``infra_error`` when no session could run it).
    """
    started = time.monotonic()
    if "test.sh" not in tests:
        return VerifierOutcome(R.FAILED, detail="the task has no tests/test.sh")
    # Only the state directories' files: nothing of a state reaches /tests or /logs (the
    # caller's final state keeps only those already; this holds whatever it passes).
    state = {path: data for path, data in state.items() if in_state_dirs(path, state_dirs)}
    workspace = state_workspace(
        state,
        executable,
        extra={"/tests": tests, "/crucible": confine_tool(state_dirs)},
        empty_dirs=("/logs/verifier",),
    )
    try:
        session, services_started, isolation = open_terminal_session(
            workspace,
            state_dirs=state_dirs,
            read_only=["/tests", "/crucible"],
            verifier_dirs=["/logs"],
            services=services,
            workdir=workdir,
            env=env,
            environment=environment,
            runtime=runtime,
            landlocked=True,
        )
    except SessionError as exc:
        kind = R.INFRA_ERROR if isinstance(exc, SessionLost) else R.FAILED
        return VerifierOutcome(kind, detail=f"the grading session did not open: {exc}")
    try:
        done = session.exec(
            "bash /tests/test.sh",
            cwd=workdir,
            env={**(env or {}), **VERIFIER_ENV},
            timeout_s=timeout_s,
            output_cap_bytes=OUTPUT_TAIL_CHARS * 4,
        )
        output = (done.stdout + ("\n" + done.stderr if done.stderr else ""))[-OUTPUT_TAIL_CHARS:]
        for service in services_started:
            service["log"] = _read(session, service["log"], 4000)
        # What the state left running stops before the reward is read (see the module for the
        # window this cannot close: test.sh's own runs of the agent's code).
        session.exec("kill -KILL -1", timeout_s=10.0)
        if done.status == R.TIMEOUT:
            outcome = VerifierOutcome(
                R.TIMEOUT,
                output=output,
                detail=f"tests/test.sh ran past the verifier's {timeout_s:g} s",
            )
        else:
            reward, why = read_reward(session)
            outcome = (
                VerifierOutcome("ok", reward=reward, output=output)
                if reward is not None
                else VerifierOutcome(R.FAILED, output=output, detail=why)
            )
    except SessionLost as exc:
        outcome = VerifierOutcome(R.INFRA_ERROR, detail=f"the grading session was lost: {exc}")
    except SessionError as exc:
        outcome = VerifierOutcome(R.FAILED, detail=f"the grading session refused a call: {exc}")
    finally:
        session.close()
    outcome.isolation = isolation
    outcome.services = services_started
    outcome.wall_ms = (time.monotonic() - started) * 1000
    return outcome
