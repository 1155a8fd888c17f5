"""Sticky routing of session calls over the sandbox queue's Redis: the keys both sides share.

Every worker slot that serves sessions (``sandboxes/sessions/slot.py``) has an id
(``<worker name>-s<k>``), a heartbeat (the queue's ``alive`` key, same TTL), an inbox
list of calls and its ``processing`` list, and announces itself in its runtime's set of
session slots with the number of sessions it holds:

* ``crucible:sandbox:<runtime>:session-slots``: set of session slot ids;
* ``crucible:sandbox:worker:<slot>:alive``: the heartbeat (``sandboxes.queue.alive_key``);
* ``crucible:sandbox:worker:<slot>:calls``: the inbox (callers ``LPUSH``, the slot ``BLMOVE``s
  each call into ``crucible:sandbox:worker:<slot>:processing`` while it runs it);
* ``crucible:sandbox:worker:<slot>:sessions``: how many sessions it holds (a placement hint);
* ``crucible:sandbox:workspace:<digest>``: a workspace's blob, uploaded once by callers
  (TTL :data:`WORKSPACE_TTL_S`, refreshed by each open) and read by a slot that does not
  hold it yet.

A session lives in the slot that opened it: its id travels with the slot's id, and every
call goes to that slot's inbox and no other. A call is ``{"id", "reply_to", "op",
"session", ...}``; its answer, on ``reply_to``, is ``{"id", "ok": ...}`` or ``{"id",
"error": {"kind", "detail"}}``, ``kind`` ``lost`` (an ``infra_error``: the session's
worker died or restarted, or its processes died), ``closed``, ``invalid``, or a file
operation's refusal (``not_found``, ``outside``...).

A slot that dies leaves its inbox and ``processing`` lists behind: any live worker's
reaper (:data:`REAP_SCRIPT`, run by :func:`reap_dead_slots`) answers every call in them
with ``lost``, naming the session, and forgets the slot. Callers also watch the slot's
heartbeat while they wait, so a call that reaches a dead slot later is answered the
same way by the caller itself.
"""

from __future__ import annotations

import logging

from sandboxes import queue as Q

log = logging.getLogger(__name__)
WORKSPACE_TTL_S = 3600
REPLY_TTL_S = Q.REPLY_TTL_S


def registry_key(runtime: str) -> str:
    return f"{Q.PREFIX}:{runtime}:session-slots"


def calls_key(slot_id: str) -> str:
    return f"{Q.PREFIX}:worker:{slot_id}:calls"


def load_key(slot_id: str) -> str:
    return f"{Q.PREFIX}:worker:{slot_id}:sessions"


def workspace_key(digest: str) -> str:
    return f"{Q.PREFIX}:workspace:{digest}"


def lost_detail(slot_id: str, session_id: str | None) -> str:
    """The words of a ``lost`` answer (the reaper's Lua script says the same)."""
    why = f"its sandbox worker slot {slot_id} died"
    return f"session {session_id} was lost: {why}" if session_id else why


# KEYS: the slot's calls and processing lists, the runtime's registry; ARGV: slot id, TTL.
# Answers every call the dead slot held with {"kind": "lost"} naming its session, and
# forgets the slot: atomic, so two reapers never answer twice.
REAP_SCRIPT = """
local answered = 0
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  while true do
    local item = redis.call('RPOP', key)
    if not item then break end
    local ok, call = pcall(cjson.decode, item)
    if ok and type(call) == 'table' and type(call['reply_to']) == 'string' and call['id'] then
      local why = 'its sandbox worker slot ' .. ARGV[1] .. ' died'
      if type(call['session']) == 'string' then
        why = 'session ' .. call['session'] .. ' was lost: ' .. why
      end
      redis.call('LPUSH', call['reply_to'],
        cjson.encode({id = call['id'], error = {kind = 'lost', detail = why}}))
      redis.call('EXPIRE', call['reply_to'], ARGV[2])
      answered = answered + 1
    end
  end
end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
return answered
"""


def reap_dead_slots(runtime: str, client=None) -> int:
    """Answer the calls of every dead session slot of ``runtime`` with ``lost`` and forget
    those slots; returns how many calls were answered.

    Raises:
        redis.RedisError: Redis does not answer.
    """
    client = client or Q.connection()
    answered = 0
    for raw in client.smembers(registry_key(runtime)):
        slot_id = raw.decode()
        if client.exists(Q.alive_key(slot_id)):
            continue
        count = int(
            client.eval(
                REAP_SCRIPT,
                4,
                calls_key(slot_id),
                Q.processing_key(slot_id),
                registry_key(runtime),
                load_key(slot_id),
                slot_id,
                REPLY_TTL_S,
            )
        )
        log.warning("session slot %s died; answered %d of its calls as lost", slot_id, count)
        answered += count
    return answered


def live_slots(runtime: str, client=None) -> dict[str, int]:
    """The live session slots of ``runtime`` and the sessions each holds (the hint)."""
    client = client or Q.connection()
    ids = sorted(raw.decode() for raw in client.smembers(registry_key(runtime)))
    if not ids:
        return {}
    pipe = client.pipeline(transaction=False)
    for slot_id in ids:
        pipe.exists(Q.alive_key(slot_id))
        pipe.get(load_key(slot_id))
    answers = pipe.execute()
    slots = {}
    for index, slot_id in enumerate(ids):
        alive, load = answers[2 * index], answers[2 * index + 1]
        if alive:
            try:
                slots[slot_id] = int(load or 0)
            except ValueError:
                slots[slot_id] = 0
    return slots
