"""A worker slot that holds sessions: its inbox, its :class:`SessionHost`, its leases.

One :class:`SessionSlot` thread per slot of ``sandbox_worker`` (``--session-slots``): it
starts the slot's session zygote (which dies with the thread that started it), then
``parallel_calls`` consumer threads that each block on the slot's inbox (``BLMOVE`` into its
``processing`` list, see :mod:`routing`) and answer the call they took, whatever it is: Redis
hands each call to one waiting thread, so no call waits for a hand-over between threads, and
a long call of one session does not hold up the calls of the others (one session still takes
one call at a time). The slot's own thread then, every second, closes the sessions whose lease
ran out, deletes workspaces no session used for a minute, and restarts the zygote if it died.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time

import redis

from sandboxes import pool_stats
from sandboxes import queue as Q
from sandboxes.environments.store import EnvironmentCorrupt
from sandboxes.resident import SandboxSetupFailed, ZygoteDied
from sandboxes.runtimes import runtime_mount
from sandboxes.sessions import routing
from sandboxes.sessions.budget import OverBudget, SessionBudget
from sandboxes.sessions.host import FileOpRefused, SessionGone, SessionHost
from sandboxes.sessions.limits import SessionLimits, check_exec
from sandboxes.sessions.store import WorkspaceStore

log = logging.getLogger(__name__)
PARALLEL_CALLS = 8  # calls of different sessions of one slot running at once
FILE_OPS = ("read", "write", "list", "diff", "changes", "state")
HOUSEKEEPING_EVERY_S = 1.0


def session_entry(call: dict, answer: dict, started: float) -> str:
    """A session call as one of the pool's recent executions (``sandboxes.pool_stats``): kind
    ``session_<op>``; an exec's own status and wall time, ``ok`` for another call that answered,
    ``infra_error`` for a lost session or sandbox, else the refusal's kind."""
    elapsed_ms = (time.monotonic() - started) * 1000
    ok = answer.get("ok")
    if isinstance(ok, dict) and call.get("op") == "exec":
        status, wall_ms = str(ok.get("status", "ok")), float(ok.get("wall_ms") or 0.0)
    elif "error" in answer:
        kind = answer["error"].get("kind", "lost")
        status, wall_ms = ("infra_error" if kind == "lost" else kind), elapsed_ms
    else:
        status, wall_ms = "ok", elapsed_ms
    return pool_stats.recent_entry(
        kind=f"session_{call.get('op', '?')}", status=status, wall_ms=wall_ms, exec_ms=elapsed_ms
    )


class SessionSlot(threading.Thread):
    """One slot's sessions (see the module). ``stopping`` is the worker's stop event."""

    def __init__(
        self,
        *,
        slot_id: str,
        runtime: str,
        store: WorkspaceStore,
        stopping: threading.Event,
        parallel_calls: int = PARALLEL_CALLS,
        budget: SessionBudget | None = None,
    ) -> None:
        super().__init__(name=f"session-slot-{slot_id}", daemon=True)
        self.slot_id = slot_id
        self.runtime = runtime
        self.store = store
        self.stopping = stopping
        self.parallel_calls = parallel_calls
        self.budget = budget  # the worker's, shared by its slots
        self.host: SessionHost | None = None
        self.ready = threading.Event()  # its zygote started: it serves

    def sessions(self) -> int:
        return self.host.count() if self.host else 0

    def run(self) -> None:
        client = Q.connection()
        consumers: list[threading.Thread] = []
        try:
            while not self.stopping.wait(0 if self.host is None else HOUSEKEEPING_EVERY_S):
                try:
                    if self.host is None:
                        host = SessionHost(
                            self.store, mount=runtime_mount(self.runtime), budget=self.budget
                        )
                        host.start()  # on this thread: its zygote dies with it (PDEATHSIG)
                        self.host = host
                        consumers = [
                            threading.Thread(
                                target=self._consume, name=f"{self.name}-call-{k}", daemon=True
                            )
                            for k in range(self.parallel_calls)
                        ]
                        for consumer in consumers:
                            consumer.start()
                        self.ready.set()
                    self._housekeeping(client)
                except (redis.RedisError, OSError, ZygoteDied) as exc:
                    log.warning("session slot %s: %s; retrying in 1 s", self.slot_id, exc)
                    self.stopping.wait(1)
        finally:
            for consumer in consumers:
                consumer.join(timeout=60)
            if self.host is not None:
                self.host.stop()
            try:  # the calls still queued for it get their answer now, not at the heartbeat's TTL
                client.delete(Q.alive_key(self.slot_id))
                routing.reap_dead_slots(self.runtime, client)
            except (redis.RedisError, OSError):
                pass

    def _consume(self) -> None:
        """One consumer thread: take a call off the inbox, answer it, again."""
        client = Q.connection()
        inbox, processing = routing.calls_key(self.slot_id), Q.processing_key(self.slot_id)
        while not self.stopping.is_set():
            try:
                raw = client.blmove(inbox, processing, 1, "RIGHT", "LEFT")
                if raw is None:
                    continue
                try:
                    call = json.loads(raw)
                    call["id"], call["reply_to"]  # a call without them cannot be answered
                except (ValueError, TypeError, KeyError) as exc:
                    log.error("session slot %s: dropping a malformed call (%s)", self.slot_id, exc)
                    client.lrem(processing, 1, raw)
                    continue
                self._answer(client, raw, call)
            except (redis.RedisError, OSError) as exc:
                log.warning("session slot %s: %s; retrying in 1 s", self.slot_id, exc)
                self.stopping.wait(1)

    def _housekeeping(self, client: redis.Redis) -> None:
        """Leases, unused workspaces, and a zygote that died (its sessions died with it; new
        ones need a new zygote, started on this thread)."""
        host = self.host
        if not host.zygote.alive:
            log.warning("session slot %s: its session zygote died; restarting it", self.slot_id)
            host.restart_zygote()
        closed = host.expire()
        for session_id in closed:
            log.info("session slot %s: closed %s by its lease", self.slot_id, session_id)
        if closed:
            client.set(routing.load_key(self.slot_id), self.sessions(), ex=Q.HEARTBEAT_TTL_S * 3)
        self.store.sweep()

    def _answer(self, client: redis.Redis, raw: bytes, call: dict) -> None:
        started = time.monotonic()
        try:
            answer = {"ok": self._run(client, call)}
        except SessionGone as exc:
            answer = {"error": {"kind": exc.kind, "detail": str(exc)}}
        except FileOpRefused as exc:
            answer = {"error": {"kind": exc.kind, "detail": exc.detail}}
        except OverBudget as exc:
            answer = {"error": {"kind": exc.kind, "detail": exc.detail}}
        except (ValueError, TypeError, KeyError) as exc:
            answer = {"error": {"kind": "invalid", "detail": str(exc)[:1000]}}
        except (SandboxSetupFailed, ZygoteDied, OSError, EnvironmentCorrupt) as exc:
            log.warning("session slot %s: %s failed: %s", self.slot_id, call.get("op"), exc)
            answer = {"error": {"kind": "lost", "detail": f"the sandbox failed: {exc}"}}
        except Exception as exc:  # logged: one bad call must not take the slot down
            log.exception("session slot %s: call %s failed", self.slot_id, call.get("id"))
            answer = {"error": {"kind": "lost", "detail": f"sandbox worker error: {exc}"}}
        pipe = client.pipeline(transaction=False)
        pipe.lpush(call["reply_to"], json.dumps(dict(answer, id=call["id"])))
        pipe.expire(call["reply_to"], routing.REPLY_TTL_S)
        pipe.lrem(Q.processing_key(self.slot_id), 1, raw)
        if call.get("op") in ("open", "close"):
            pipe.set(routing.load_key(self.slot_id), self.sessions(), ex=Q.HEARTBEAT_TTL_S * 3)
        # the pool panel's recent executions count session work too (in the same round trip)
        pool_stats.record(pipe, self.runtime, session_entry(call, answer, started))
        pipe.execute()

    def _run(self, client: redis.Redis, call: dict):
        """One call's answer (``ok``); raises what :meth:`_answer` turns into an error."""
        host = self.host
        op = call.get("op")
        if op == "open":
            digest = str(call.get("workspace", ""))
            limits = SessionLimits.from_dict(call.get("limits"))

            def load() -> bytes:
                blob = client.get(routing.workspace_key(digest))
                if blob is None:
                    raise ValueError(f"workspace {digest} is not in Redis (upload it first)")
                return blob

            session = host.open(
                digest,
                limits,
                load_blob=load,
                environment=call.get("environment"),
                state_dirs=call.get("state_dirs"),
            )
            client.expire(routing.workspace_key(digest), routing.WORKSPACE_TTL_S)
            return {
                "session": session.id,
                "slot": self.slot_id,
                "pid": session.pid,
                "cgroup": session.cgroup_name,
                "enforcement": host.enforcement,
                "workspace": digest,
            }
        session_id = str(call.get("session", ""))
        if op == "exec":
            args = call.get("args") or {}
            stdin = args.get("stdin")
            options = {
                "timeout_s": args.get("timeout_s", 30.0),
                "cpu_s": args.get("cpu_s"),
                "env": args.get("env") or {},
                "output_cap_bytes": args.get("output_cap_bytes", 64 * 1024),
            }
            command = args.get("command")
            check_exec(command, **options)
            result = host.exec(
                session_id,
                command,
                stdin=base64.b64decode(stdin) if stdin is not None else None,
                cwd=str(args.get("cwd") or "."),
                **options,
            )
            return result.to_dict()
        if op in FILE_OPS:
            args = dict(call.get("args") or {})
            data = args.pop("data", None)
            return host.file_op(
                session_id, op, args, base64.b64decode(data) if data is not None else None
            )
        if op == "close":
            host.close(session_id)
            return {"closed": True}
        raise ValueError(f"unknown session call {op!r}")
