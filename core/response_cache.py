"""Micro-caching of the console's read-only pages and API answers, in front of Django.

A console under load answers the same GETs again and again: a team's browsers reloading a run
page, scripts polling ``/api/runs/``. Each costs Django 5-30 ms of CPU (middleware, queries,
templates) when the answer it gave a moment ago would do. :class:`ResponseCache` is an ASGI
middleware that keeps the ``200`` answers of opted-in views (``settings.WEB_RESPONSE_CACHE_VIEWS``,
URL names) in the worker process and serves them again without entering Django, until the
data under them changes (the technique reverse proxies call micro-caching, with invalidation).

What keeps it correct:

- **Per credentials, never shared.** The key hashes the method, scheme, host, path and query
  with the request's ``Cookie`` and ``Authorization`` headers (and ``Accept``,
  ``Accept-Language``, ``X-Requested-With``): an answer is served only to a request that
  carries exactly the credentials it was made for, so no user ever sees another's page, CSRF
  token or role-dependent button. Only a ``200`` is kept, and not one that sets a cookie (but
  the renewal of the request's own CSRF cookie), says ``Cache-Control: no-store`` or varies on
  a header outside the key. Each hit gets a fresh CSP nonce.
- **Writes invalidate, everywhere at once.** The *epoch*, a random token in Redis shared by
  every worker process and replica, is read before Django computes an answer and stored with it;
  a lookup reads it again and serves the answer only while it is unchanged. It is drawn anew
  (never a value it had: a counter would come back to old values after Redis lost it) after
  every unsafe request through the web tier (POST, PUT, PATCH, DELETE), with every live event
  the console broadcasts (:func:`bump_epoch` from :func:`core.events.broadcast_event`: a step
  recorded, a run's status, a build) and when a transaction that wrote a table of the apps the
  cached views show commits (:func:`bump_on_shown_write`, a database execute wrapper on every
  connection: ``save``, ``update``, ``bulk_create``, raw SQL alike). A write by anything that is
  not a Crucible process (``psql`` by hand) shows within ``ttl_ms``.
- **Shared, bounded.** A kept answer lives in the worker process that computed it (least
  recently used dropped past the process's budget) and, up to a budget of its own, in Redis
  beside its epoch (``<prefix>:answers:<epoch>``), so the pod's other workers and the other
  replicas serve it too instead of each computing it again: a restarted or just-invalidated tier
  computes each answer once, not once per process. Renewing the epoch unlinks the old epoch's
  answers at once, and every write of an answer sets its hash's expiry to the TTL, so Redis holds
  at most one epoch's budget for long (the broker's queues keep their memory).
- **Best effort.** Redis unreachable: the request goes to Django uncached (logged once per
  outage), never fails because of the cache.

The price: every write drops every kept answer, so under a steady stream of writes (trainers
recording steps) the hit rate falls with the write rate, and a request costs what Django costs.

Settings: ``CRUCIBLE_WEB_RESPONSE_CACHE_MS`` (how long an answer is kept at most, default
30,000; 0 turns the cache off), ``CRUCIBLE_WEB_RESPONSE_CACHE_MAX_BYTES`` (the largest answer
kept, default 1 MiB), ``CRUCIBLE_WEB_RESPONSE_CACHE_BUDGET_MB`` (per worker process, default
64), ``CRUCIBLE_WEB_RESPONSE_CACHE_SHARED_MB`` (the answers of one epoch in Redis, default 32;
0: none shared). Answers served from it carry ``X-Crucible-Cache: hit``, and the process's
``crucible_web_response_cache_total{result}`` counter (``/metrics``) counts hits (``hit``: from
the process, ``shared``: from Redis), misses and answers not kept.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import functools
import hashlib
import json
import logging
import os
import random
import re
import time

from prometheus_client import Counter

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
KEY_HEADERS = (b"cookie", b"authorization", b"accept", b"accept-language", b"x-requested-with")
"""Request headers an answer may depend on: all part of the key."""
VARY_ALLOWED = frozenset(name.decode() for name in KEY_HEADERS)
EPOCH_KEY = "epoch"
ANSWERS_KEY = "answers"
"""``<prefix>:answers:<epoch>``: the hash of the answers shared under an epoch (field: the key)."""
BYTES_KEY = "answer-bytes"
"""``<prefix>:answer-bytes:<epoch>``: the bytes that hash holds (its budget's count)."""
SHARE_SCRIPT = """
local old = redis.call('HSTRLEN', KEYS[1], ARGV[1])
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local size = string.len(ARGV[2])
if used - old + size > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[2], size - old)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
"""
"""Share one answer (KEYS: the epoch's hash and byte count; ARGV: field, packed answer, budget
in bytes, TTL in ms) unless the epoch's budget is spent; an answer replaced is counted out."""
HIT_HEADER = (b"x-crucible-cache", b"hit")
FLIGHT_WAIT_S = 10.0
"""How long a request waits for the same key's answer in flight before computing its own."""
NONCE = re.compile(rb"'nonce-([A-Za-z0-9+/=_-]{16,})'")
"""A script nonce in a Content-Security-Policy header (django-csp writes one per page)."""

RESULTS = Counter(
    "crucible_web_response_cache",
    "Cacheable console GETs by result: hit (served from the process's cache), shared (served "
    "from an answer another process kept in Redis), miss (computed and kept), uncacheable "
    "(computed, not kept: status, Set-Cookie, no-store, Vary, size)",
    ["result"],
)


def _key(scope: dict) -> str:
    """The sha256 of what an answer may depend on: method, scheme, path, query, ``Host`` and
    the :data:`KEY_HEADERS`, each header's values in the order sent."""
    named = (b"host", *KEY_HEADERS)
    values: dict[bytes, list[bytes]] = {name: [] for name in named}
    for name, value in scope.get("headers", ()):
        if name in values:
            values[name].append(value)
    material = [
        scope.get("method", "GET").encode(),
        scope.get("scheme", "http").encode(),
        scope.get("path", "").encode("utf-8", "surrogateescape"),
        scope.get("query_string", b""),
        *(name + b"=" + b"\x00".join(values[name]) for name in named),
    ]
    return hashlib.sha256(b"\x01".join(material)).hexdigest()


def _keepable(status: int, headers: list, size: int, max_bytes: int, renewal: bytes) -> bool:
    """Whether an answer may be kept: a ``200`` within ``max_bytes``, that sets no cookie but
    ``renewal`` (the request's own CSRF cookie sent back with a new expiry: Django does that
    on every page with a form), is not ``no-store``, and varies on the key's headers only."""
    if status != 200 or size > max_bytes:
        return False
    for name, value in headers:
        name = name.lower()
        if name == b"set-cookie" and not (renewal and value.startswith(renewal)):
            return False
        if name == b"cache-control" and b"no-store" in value.lower():
            return False
        if name == b"vary":
            varied = {part.strip().lower() for part in value.decode("latin-1").split(",")}
            if not varied <= VARY_ALLOWED:
                return False
    return True


def _fresh_nonce(headers: list, body: bytes) -> tuple[list, bytes]:
    """The answer with its CSP script nonce replaced by a new random one, in the header and
    wherever the page carries it: a nonce must not repeat between answers (CSP Level 3,
    section 7.1), a kept page included. The nonce is 128 random bits, so replacing its every
    occurrence touches nothing else."""
    policy = b"content-security-policy"
    for name, value in headers:
        if name.lower() == policy:  # Django sends header names as written, capitalised
            found = NONCE.search(value)
            if found:
                old = found.group(1)
                new = base64.b64encode(os.urandom(16))
                headers = [
                    (key, val.replace(old, new) if key.lower() == policy else val)
                    for key, val in headers
                ]
                return headers, body.replace(old, new)
    return headers, body


async def _send_kept(send, status: int, headers: list, body: bytes) -> None:
    """Send a kept answer (from this process or shared) with a fresh CSP nonce."""
    headers, body = _fresh_nonce(headers, body)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _pack(expires_at: float, status: int, headers: list, body: bytes) -> bytes:
    """An answer as Redis keeps it: a JSON line (wall-clock expiry in seconds since the epoch,
    status, headers as latin-1 text), then the body. Data only: reading it back runs no code,
    whatever Redis holds."""
    head = {
        "expires_at": expires_at,
        "status": status,
        "headers": [[name.decode("latin-1"), value.decode("latin-1")] for name, value in headers],
    }
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + body


def _unpack(packed: bytes) -> tuple[float, int, list, bytes] | None:
    """:func:`_pack`'s answer back, or None for anything else."""
    head, _newline, body = packed.partition(b"\n")
    try:
        fields = json.loads(head)
        headers = [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in fields["headers"]
        ]
        return float(fields["expires_at"]), int(fields["status"]), headers, body
    except (ValueError, KeyError, TypeError, UnicodeError):
        return None


class ResponseCache:
    """ASGI middleware: per-credential micro-caching of opted-in GETs (module docstring).

    Args:
        app: the ASGI application behind it.
        redis_url: the Redis (``redis://``, ``rediss://`` or ``unix://``) the epoch lives in,
            shared by every worker process and replica.
        prefix: the epoch's key prefix (``<prefix>:epoch``).
        ttl_ms: how long an answer is kept, in milliseconds; 0 passes every request through.
        cacheable: ``path -> bool``, whether a GET of that path may be cached (the views in
            ``settings.WEB_RESPONSE_CACHE_VIEWS``).
        max_bytes: the largest body kept, in bytes.
        budget_bytes: the bodies this process keeps at most, in bytes (least recently used
            dropped first).
        shared_bytes: the answers of one epoch shared through Redis at most, in bytes (0: none
            shared); past it answers stay in their process only, so the cache cannot crowd the
            broker's queues out of Redis's memory.
        csrf_cookie: the CSRF cookie's name: an answer that only renews the request's own
            CSRF cookie may be kept (its value is part of the key).
    """

    def __init__(
        self,
        app,
        *,
        redis_url: str,
        prefix: str,
        ttl_ms: int,
        cacheable,
        max_bytes: int,
        budget_bytes: int = 64 * 2**20,
        shared_bytes: int = 0,
        csrf_cookie: str = "csrftoken",
    ):
        self.app = app
        self.budget_bytes = int(budget_bytes)
        self.shared_bytes = int(shared_bytes)
        self._sharing: set[asyncio.Task] = set()  # answers on their way to Redis
        # key -> (expires at, monotonic s; epoch; status; headers; body), oldest use first
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._held = 0  # bytes of the bodies kept
        self._flights: dict[str, asyncio.Future] = {}  # key -> its computation in Django
        self.csrf_cookie = csrf_cookie
        self.redis_url = redis_url
        self.prefix = prefix
        self.ttl_ms = int(ttl_ms)
        self.cacheable = cacheable
        self.max_bytes = int(max_bytes)
        self._redis = None
        self._down = False

    def _client(self):
        # An asyncio client belongs to the loop it first ran in: one per loop (a server runs
        # one loop per worker; tests run several in turn).
        import redis.asyncio  # noqa: PLC0415 (only where the cache is on)

        loop = asyncio.get_running_loop()
        if self._redis is None or self._redis[0] is not loop:
            client = redis.asyncio.Redis.from_url(
                self.redis_url, socket_timeout=1, socket_connect_timeout=1
            )
            self._redis = (loop, client)
        return self._redis[1]

    async def settled(self) -> None:
        """Wait until the answers on their way to Redis are there (tests; a server never
        needs to)."""
        while self._sharing:
            await asyncio.gather(*self._sharing, return_exceptions=True)

    def _failed(self, exc: Exception) -> None:
        if not self._down:
            self._down = True
            log.warning("response cache off until Redis answers: %s: %s", type(exc).__name__, exc)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.ttl_ms <= 0:
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        if method not in SAFE_METHODS:
            try:
                await self.app(scope, receive, send)
            finally:
                await self._bump()
            return
        if method != "GET" or not self.cacheable(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        await self._cached(scope, receive, send)

    def _renewal(self, scope) -> bytes:
        """``b"<csrf cookie>=<value>;"`` for the CSRF cookie the request sent, else ``b""``."""
        from django.http.cookie import parse_cookie  # noqa: PLC0415

        for name, value in scope.get("headers", ()):
            if name == b"cookie":
                token = parse_cookie(value.decode("latin-1")).get(self.csrf_cookie)
                if token:
                    return f"{self.csrf_cookie}={token};".encode("latin-1")
        return b""

    async def _bump(self) -> None:
        try:
            client = self._client()
            old = await client.set(f"{self.prefix}:{EPOCH_KEY}", new_epoch(), get=True)
            if old is not None:
                await client.unlink(*_shared_names(self.prefix, old))
            self._down = False
        except Exception as exc:  # noqa: BLE001 (the cache is best effort; see the docstring)
            self._failed(exc)

    async def _epoch(self) -> bytes:
        """The epoch now; where Redis has none (never written, or lost), a fresh one is set
        first, so an epoch never comes back to a value answers were kept under."""
        client, name = self._client(), f"{self.prefix}:{EPOCH_KEY}"
        epoch = await client.get(name)
        if epoch is None:
            await client.set(name, new_epoch(), nx=True)
            epoch = await client.get(name)
        return epoch

    async def _cached(self, scope, receive, send) -> None:
        key = _key(scope)
        try:
            epoch = await self._epoch()
            self._down = False
        except Exception as exc:  # noqa: BLE001 (best effort: Django answers uncached)
            self._failed(exc)
            await self.app(scope, receive, send)
            return
        if await self._served(key, epoch, send):
            return
        # Single flight: while one request of this key is in Django, the others wait for its
        # answer instead of each computing it (a cold or just-invalidated cache at hundreds of
        # requests a second would otherwise queue the same work many times over).
        flight = self._flights.get(key)
        if flight is not None:
            try:
                await asyncio.wait_for(asyncio.shield(flight), FLIGHT_WAIT_S)
            except TimeoutError:
                pass
            if not await self._served(key, epoch, send):  # not kept, or of another epoch
                await self._computed(key, epoch, scope, receive, send)
            return
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            if not await self._shared(key, epoch, send):
                await self._computed(key, epoch, scope, receive, send)
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if not flight.done():
                flight.set_result(None)

    async def _served(self, key, epoch, send) -> bool:
        """Answer from the kept entry of ``key`` when it is of ``epoch`` and alive."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        expires, stored_epoch, status, headers, body = entry
        if stored_epoch != epoch or time.monotonic() >= expires:
            self._drop(key)
            return False
        self._entries.move_to_end(key)
        RESULTS.labels("hit").inc()
        await _send_kept(send, status, headers, body)
        return True

    async def _shared(self, key, epoch, send) -> bool:
        """Answer from the copy another process shared in Redis, when there is a live one of
        ``epoch`` (kept in this process too, for its remaining life)."""
        if self.shared_bytes <= 0:
            return False
        answers, _count = _shared_names(self.prefix, epoch)
        try:
            packed = await self._client().hget(answers, key)
        except Exception as exc:  # noqa: BLE001 (best effort: computed instead)
            self._failed(exc)
            return False
        answer = _unpack(packed) if packed is not None else None
        if answer is None:
            return False
        expires_at, status, headers, body = answer
        life = expires_at - time.time()
        if life <= 0:
            return False
        self._store(key, epoch, time.monotonic() + life, status, headers, body)
        RESULTS.labels("shared").inc()
        await _send_kept(send, status, headers, body)
        return True

    async def _share(self, key, epoch, life_s, status, headers, body) -> None:
        answers, count = _shared_names(self.prefix, epoch)
        packed = _pack(time.time() + life_s, status, headers, body)
        try:
            await self._client().eval(
                SHARE_SCRIPT, 2, answers, count, key, packed, self.shared_bytes, self.ttl_ms
            )
        except Exception as exc:  # noqa: BLE001 (best effort: kept in this process only)
            self._failed(exc)

    async def _computed(self, key, epoch, scope, receive, send) -> None:
        start: dict = {}
        chunks: list[bytes] = []
        size = 0
        renewal = self._renewal(scope)

        async def capture(message):
            # kept before its last body part goes out: once the client has it, the server may
            # cancel this request's task
            nonlocal size
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body" and start:
                size += len(message.get("body", b""))
                if size <= self.max_bytes:
                    chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    self._keep(key, epoch, start, size, b"".join(chunks), renewal)
            await send(message)

        await self.app(scope, receive, capture)

    def _keep(self, key, epoch, start, size, body, renewal) -> None:
        headers = list(start.get("headers", ()))
        if not _keepable(start["status"], headers, size, self.max_bytes, renewal):
            RESULTS.labels("uncacheable").inc()
            return
        RESULTS.labels("miss").inc()
        # each answer's life drawn in [3/4, 1] of the TTL: answers kept together do not all
        # expire together (a burst of misses every TTL)
        life_s = self.ttl_ms / 1000 * (0.75 + 0.25 * random.random())
        headers = [*headers, HIT_HEADER]
        self._store(key, epoch, time.monotonic() + life_s, start["status"], headers, body)
        if self.shared_bytes > 0:
            task = asyncio.get_running_loop().create_task(
                self._share(key, epoch, life_s, start["status"], headers, body)
            )
            self._sharing.add(task)  # held until done: the loop keeps weak references only
            task.add_done_callback(self._sharing.discard)

    def _store(self, key, epoch, expires, status, headers, body) -> None:
        """Keep an answer in this process until ``expires`` (monotonic seconds)."""
        self._drop(key)
        self._entries[key] = (expires, epoch, status, headers, body)
        self._held += len(body)
        while self._held > self.budget_bytes and self._entries:
            self._drop(next(iter(self._entries)))  # the least recently used

    def _drop(self, key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._held -= len(entry[4])


@functools.lru_cache(maxsize=4096)
def view_cacheable(path: str) -> bool:
    """Whether ``path`` resolves to a view named in ``settings.WEB_RESPONSE_CACHE_VIEWS``."""
    from django.conf import settings  # noqa: PLC0415
    from django.urls import Resolver404, resolve  # noqa: PLC0415

    try:
        match = resolve(path)
    except Resolver404:
        return False
    return match.view_name in settings.WEB_RESPONSE_CACHE_VIEWS


_sync_client = None
_sync_down_until = 0.0
SYNC_RETRY_S = 5.0
"""After a failed bump, the next bumps are skipped this long (a missed bump only shortens an
answer's life to its TTL; a Redis that hangs must not hold every write)."""


def _shared_names(prefix: str, epoch: bytes | str) -> tuple[str, str]:
    """The Redis keys of an epoch's shared answers: the hash and its byte count."""
    if isinstance(epoch, bytes):
        epoch = epoch.decode("ascii", "replace")
    return f"{prefix}:{ANSWERS_KEY}:{epoch}", f"{prefix}:{BYTES_KEY}:{epoch}"


def new_epoch() -> str:
    """A fresh epoch: 128 random bits, so never one an answer was kept under."""
    return os.urandom(16).hex()


def bump_epoch() -> None:
    """Invalidate every kept answer (a fresh epoch), from sync code: called with each
    live event the console broadcasts and after each write to a row the console shows. Best
    effort: a Redis error is logged once per outage, never raised (the answers then expire
    within ``CRUCIBLE_WEB_RESPONSE_CACHE_MS``)."""
    global _sync_client, _sync_down_until  # one client per process
    from django.conf import settings  # noqa: PLC0415

    if settings.WEB_RESPONSE_CACHE_MS <= 0 or time.monotonic() < _sync_down_until:
        return
    try:
        if _sync_client is None:
            import redis  # noqa: PLC0415

            _sync_client = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
            )
        prefix = settings.WEB_RESPONSE_CACHE_PREFIX
        old = _sync_client.set(f"{prefix}:{EPOCH_KEY}", new_epoch(), get=True)
        if old is not None:  # the old epoch's shared answers can never be served again
            _sync_client.unlink(*_shared_names(prefix, old))
    except Exception as exc:  # noqa: BLE001 (best effort)
        if not _sync_down_until:  # info: `migrate` before Redis starts lands here
            log.info("could not invalidate the response cache: %s: %s", type(exc).__name__, exc)
        _sync_down_until = time.monotonic() + SYNC_RETRY_S
        return
    _sync_down_until = 0.0


SHOWN_WRITE = re.compile(
    r'\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?(?:auth|console|review|tasks_library|training)_',
    re.IGNORECASE,
)
"""A statement that writes a table of an app whose rows the cached views show."""


def bump_on_shown_write(execute, sql, params, many, context):
    """A database execute wrapper (Django's ``connection.execute_wrapper`` protocol): a
    statement that writes a shown table (:data:`SHOWN_WRITE`: ``save``, ``update``,
    ``bulk_create``, ``delete``, raw SQL alike) renews the epoch once its transaction commits,
    once per transaction. Installed on every connection by :func:`watch_connection`."""
    result = execute(sql, params, many, context)
    # after the statement: outside a transaction on_commit runs at once, and the bump must not
    # come before the write it announces
    if isinstance(sql, str) and SHOWN_WRITE.match(sql):
        connection = context["connection"]
        if not (
            connection.in_atomic_block
            and any(func is bump_epoch for _sids, func, _robust in connection.run_on_commit)
        ):
            connection.on_commit(bump_epoch, robust=True)
    return result


def watch_connection(sender, connection, **_kwargs) -> None:
    """A ``connection_created`` receiver: :func:`bump_on_shown_write` on the connection
    (once: a pooled connection is created again on every checkout)."""
    if bump_on_shown_write not in connection.execute_wrappers:
        connection.execute_wrappers.append(bump_on_shown_write)
