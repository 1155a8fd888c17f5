"""The console's channel layer: channels_redis's Redis layer with its per-channel receive locks
kept per event loop.

channels_redis serializes the receives of a channel with an ``asyncio.Lock`` per channel, kept on
the layer, which Channels keeps once per process. A receive cancelled while it waits for that
lock (a websocket closing while the last message's cleaner holds it) leaves the lock behind: its
waiter count is never decremented (django/channels_redis#313), so the lock is never dropped, and
it stays bound to the event loop it was contended on. The next loop that contends on it fails
with "bound to a different event loop". A web worker runs one loop, so there the leak is only a
lock; but every ``async_to_sync`` call (the tests' websocket clients, a management command) runs
in a new loop, and a CI rehearsal (2026-12-07) lost four console websocket tests to it. Kept per
loop, a loop's locks die with it.
"""

from __future__ import annotations

import asyncio
import weakref

from channels_redis.core import ChannelLock
from channels_redis.core import RedisChannelLayer as _RedisChannelLayer


class RedisChannelLayer(_RedisChannelLayer):
    """``channels_redis.core.RedisChannelLayer`` (same ``CONFIG``) whose ``receive_clean_locks``
    is one ``ChannelLock`` per running event loop."""

    def __init__(self, *args, **kwargs) -> None:
        self._clean_locks_by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, ChannelLock
        ] = weakref.WeakKeyDictionary()
        super().__init__(*args, **kwargs)

    @property
    def receive_clean_locks(self) -> ChannelLock:
        """The running loop's locks (channels_redis reads this only inside a loop: a receive, or
        its cleaner's done callback)."""
        loop = asyncio.get_running_loop()
        locks = self._clean_locks_by_loop.get(loop)
        if locks is None:
            locks = self._clean_locks_by_loop[loop] = ChannelLock()
        return locks

    @receive_clean_locks.setter
    def receive_clean_locks(self, value: ChannelLock) -> None:
        # channels_redis's __init__ assigns one for the whole layer: the per-loop ones replace it
        pass
