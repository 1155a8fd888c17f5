"""One call's wire between a worker and a session's init: its answers, its pipes, its result.

The host sends a call (``host.py``); :func:`receive_with_fds` reads the init's ``started``
answer and the shell's pipes that come with it; :func:`drain` reads the call's stdout and
stderr (kept up to a cap, counted past it, a kill asked for on a flood), writes its stdin and
waits for the init's ``exited`` answer; :func:`exec_result` turns the outcome into the
:class:`~sandboxes.result.ExecutionResult` every sandbox execution returns.
"""

from __future__ import annotations

import array
import json
import os
import select
import selectors
import signal
import socket
import time
from dataclasses import dataclass

from sandboxes import result as R
from sandboxes.resident import _send

DRAIN_AFTER_EXIT_S = 0.05  # a kept process may hold a call's pipes: read what is there, go


@dataclass
class CallOutcome:
    """What one call did, before it becomes a result: the init's ``exited`` answer (or its
    refusal to start), the output kept and its totals in bytes, whether it flooded, the wall
    milliseconds, the session cgroup's peak in bytes and whether its OOM killer acted."""

    report: dict
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    flooded: bool
    wall_ms: float
    peak_memory_bytes: int
    memory_limit_hit: bool


class InitGone(Exception):
    """A session's init closed its socket, failed, or did not answer in time."""


def receive_with_fds(sock: socket.socket, timeout: float) -> tuple[dict, list[int]]:
    """The init's next message and the descriptors that came with it.

    Raises:
        InitGone: it closed its socket or did not answer within ``timeout`` seconds.
    """
    poller = select.poll()  # not select(): a worker holding sessions has descriptors past 1024
    poller.register(sock, select.POLLIN)
    if not poller.poll(int(timeout * 1000)):
        raise InitGone(f"its init did not answer within {timeout:g} s")
    fds = array.array("i")
    data, ancdata, _flags, _addr = sock.recvmsg(1 << 20, socket.CMSG_LEN(16 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    if not data:
        raise InitGone("its init exited")
    return json.loads(data), list(fds)


def unstarted(reply: dict, started: float) -> CallOutcome:
    """The outcome of a call whose command never started (its init said why)."""
    return CallOutcome(
        report=reply,
        stdout=b"",
        stderr=b"",
        stdout_total=0,
        stderr_total=0,
        flooded=False,
        wall_ms=(time.monotonic() - started) * 1000,
        peak_memory_bytes=0,
        memory_limit_hit=False,
    )


def drain(session, out_r, err_r, in_w, stdin, *, cap, kill_bytes, deadline):
    """Read the call's output and the init's answer; write its stdin.

    Returns:
        ``(answer, {"stdout"|"stderr": (kept bytes, total)}, flooded)``.

    Raises:
        InitGone: the init closed its socket, or did not answer by ``deadline``.
    """
    selector = selectors.DefaultSelector()
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    totals = {"stdout": 0, "stderr": 0}
    for name, fd in (("stdout", out_r), ("stderr", err_r)):
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ, name)
    pending = memoryview(stdin or b"")
    if in_w is not None:
        os.set_blocking(in_w, False)
        if pending:
            selector.register(in_w, selectors.EVENT_WRITE, "stdin")
        else:
            os.close(in_w)
            in_w = None
    selector.register(session.control, selectors.EVENT_READ, "control")
    report = None
    flooded = False
    drain_until = None
    try:
        while True:
            now = time.monotonic()
            if report is not None and (
                drain_until is None or now >= drain_until or len(selector.get_map()) == 0
            ):
                break
            if report is None and now >= deadline:
                raise InitGone("its init did not answer within the call's time and 10 s more")
            timeout = (drain_until if report is not None else deadline) - now
            for key, _mask in selector.select(timeout=max(timeout, 0.0)):
                name = key.data
                if name == "control":
                    try:
                        data = session.control.recv(1 << 20)
                    except OSError as exc:
                        raise InitGone(f"its init's socket failed: {exc}") from exc
                    if not data:
                        raise InitGone("its init exited")
                    answer = json.loads(data)
                    if "exited" not in answer:
                        raise InitGone(f"its init answered {str(answer)[:200]}")
                    report = answer
                    selector.unregister(session.control)
                    drain_until = time.monotonic() + DRAIN_AFTER_EXIT_S
                elif name == "stdin":
                    try:
                        written = os.write(in_w, pending[: 1 << 16])
                        pending = pending[written:]
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:  # the call closed its stdin: the rest is not wanted
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(in_w)
                        os.close(in_w)
                        in_w = None
                else:
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(key.fd)
                        os.close(key.fd)
                        continue
                    totals[name] += len(chunk)
                    room = cap - len(kept[name])
                    if room > 0:
                        kept[name] += chunk[:room]
                    if not flooded and totals["stdout"] + totals["stderr"] > kill_bytes:
                        flooded = True
                        try:
                            _send(session.control, {"op": "kill"})
                        except OSError as exc:
                            raise InitGone(f"its init's socket failed: {exc}") from exc
    finally:
        for key in list(selector.get_map().values()):
            if key.data != "control":
                os.close(key.fd)
        selector.close()
    return report, {n: (kept[n], totals[n]) for n in kept}, flooded


CPU_LIMIT_SHARE = 0.8
"""The share of its CPU limit a call must have used for a SIGKILL to be the limit's: the kernel
enforces RLIMIT_CPU on its own clock, and the rusage the init reports read 92-95 % of a 1 s
limit at the kill (a SIGKILL sent at a lower use is a crash)."""


def _used_cpu_limit(report: dict, cpu_s: int | None) -> bool:
    """The call's processes used about ``cpu_s`` CPU seconds (together: the limit is per
    process, so a process that reached it took that much of the sum)."""
    used_ms = float(report.get("cpu_ms") or 0.0)
    return bool(cpu_s) and used_ms >= cpu_s * 1000 * CPU_LIMIT_SHARE


def exec_result(
    outcome: CallOutcome, cap: int, cgroup: bool, cpu_s: int | None = None
) -> R.ExecutionResult:
    """The call's :class:`ExecutionResult` from what its init reported. ``cpu_s``: the call's
    CPU-time limit in seconds (``RLIMIT_CPU``), by which a process killed with SIGKILL or SIGXCPU
    after using it is told apart from a crash: it ran out of time (``timeout``), whichever of
    the wall clock and the CPU limit ended it first."""
    report = outcome.report
    exit_code = signum = None
    detail = ""
    if report.get("exited") and report.get("status") is not None:
        code = os.waitstatus_to_exitcode(int(report["status"]))
        exit_code, signum = (None, -code) if code < 0 else (code, None)
    stage, error = report.get("stage"), report.get("error")
    if report.get("timed_out"):
        status = R.TIMEOUT
    elif outcome.flooded:
        status = R.OUTPUT_LIMIT
    elif outcome.memory_limit_hit and exit_code != 0:
        # the cgroup's OOM killer ended a process of the call, which then failed (the shell
        # itself, or a command it ran: bash reports that one as exit 137)
        status = R.MEMORY_LIMIT
    elif stage == "cwd":
        status, detail = R.FAILED, f"working directory refused: {error}"
    elif stage == "fork":
        status, detail = R.CRASHED, f"the command could not start: {error}"
    elif stage:  # the sandbox's own step failed before the command ran: never the command's doing
        status, detail = (
            R.INFRA_ERROR,
            f"the session could not start the command ({stage}): {error}",
        )
    elif signum == signal.SIGXCPU or (signum == signal.SIGKILL and _used_cpu_limit(report, cpu_s)):
        status, detail = R.TIMEOUT, f"the call used its CPU time limit of {cpu_s} s"
    elif signum is not None:
        status = R.CRASHED
    elif exit_code == 0:
        status = R.OK
    else:
        status = R.FAILED
    return R.ExecutionResult(
        status=status,
        exit_code=exit_code,
        signal=signum,
        stdout=outcome.stdout.decode("utf-8", "replace"),
        stderr=outcome.stderr.decode("utf-8", "replace"),
        truncated=outcome.stdout_total > cap or outcome.stderr_total > cap,
        wall_ms=round(outcome.wall_ms, 3),
        cpu_ms=float(report.get("cpu_ms") or 0.0),
        peak_memory_bytes=outcome.peak_memory_bytes,
        detail=detail,
        enforcement="cgroup-v1" if cgroup else "rlimit",
    )
