"""A lease in Redis: "this work is being done, by a live process", for at-most-one execution of a
redelivered Celery message.

A late-acknowledged message is delivered again when its worker dies, and also when it simply
runs longer than the broker's visibility timeout while its worker lives. The task takes a lease
named after its work (``SET key token NX PX ttl``) and a thread renews it every third of its
time to live while the work runs; a second delivery that finds the lease held knows the work is
alive elsewhere and defers, and one that finds it expired (the holder died) takes it over. The
lease is released (only by its holder: compare-and-delete) when the work ends.
"""

from __future__ import annotations

import logging
import threading
import uuid

import redis
from django.conf import settings

log = logging.getLogger(__name__)

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class Lease:
    """A renewed lease on ``key`` (a context manager: entering returns whether it was taken).

    Args:
        key: the Redis key naming the work (``crucible:lease:validation-job:12``).
        ttl_s: seconds the lease outlives a holder that stopped renewing it (died, hung);
            renewed every ``ttl_s / 3`` seconds while held.
        client: the Redis client; ``settings.REDIS_URL``'s by default.

    Raises:
        redis.RedisError: Redis could not be reached when taking the lease.
    """

    def __init__(self, key: str, *, ttl_s: float = 30.0, client: redis.Redis | None = None):
        self.key, self.ttl_ms = key, int(ttl_s * 1000)
        self.client = client or redis.Redis.from_url(settings.REDIS_URL)
        self.token = uuid.uuid4().hex
        self.held = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> bool:
        self.held = bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))
        if self.held:
            self._renewer = threading.Thread(
                target=self._renew, name=f"lease {self.key}", daemon=True
            )
            self._renewer.start()
        return self.held

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                if not self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms):
                    log.warning("lease %s was lost (expired and taken over)", self.key)
                    return
            except (redis.RedisError, OSError):
                # Redis away for a moment: the lease lives ttl_s, the next renewal may land.
                log.warning("could not renew lease %s", self.key, exc_info=True)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.held:
            try:
                self.client.eval(_RELEASE, 1, self.key, self.token)
            except (redis.RedisError, OSError):
                log.warning("could not release lease %s; it expires by itself", self.key)
            self.held = False
