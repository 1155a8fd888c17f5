"""The console's channel layer (core/channel_layer.py) keeps channels_redis's per-channel receive
locks per event loop: a lock that one loop left behind (a receive cancelled while waiting for it,
django/channels_redis#313) does not fail the next loop that receives on the same layer, as it does
on channels_redis's own layer; and messages sent and received on one layer, each round in its
own loop and ending with a cancelled receive (as a closing websocket's), keep arriving in order."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer as StockLayer
from django.conf import settings

from core.channel_layer import RedisChannelLayer

KEY = "crucible:specific.loops!"  # the key receive_single locks: prefix and a process channel


async def cancel_a_waiter(layer) -> None:
    """What ``receive_single`` does when a receive waiting for the channel's clean lock (while
    the last message's cleaner holds it) is cancelled: the lock, contended on this loop, stays."""
    locks = layer.receive_clean_locks
    await locks.acquire(KEY)
    waiter = asyncio.ensure_future(locks.acquire(KEY))
    await asyncio.sleep(0)  # the waiter is queued: the lock is bound to this loop
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    locks.release(KEY)


async def contend(layer) -> None:
    """Two receives taking the channel's clean lock one after the other, on this loop."""
    locks = layer.receive_clean_locks
    await locks.acquire(KEY)
    waiter = asyncio.ensure_future(locks.acquire(KEY))
    await asyncio.sleep(0)
    locks.release(KEY)
    await asyncio.wait_for(waiter, 5)
    locks.release(KEY)


def layer_of(cls):
    return cls(**settings.CHANNEL_LAYERS["default"]["CONFIG"])


def test_the_console_runs_the_per_loop_layer():
    assert type(get_channel_layer()) is RedisChannelLayer


def test_a_lock_one_loop_left_behind_fails_the_next_loop_on_the_stock_layer_only():
    # async_to_sync runs each call in a new event loop, as each test's websocket client does
    stock = layer_of(StockLayer)
    async_to_sync(cancel_a_waiter)(stock)
    with pytest.raises(RuntimeError, match="different event loop"):
        async_to_sync(contend)(stock)

    ours = layer_of(RedisChannelLayer)
    async_to_sync(cancel_a_waiter)(ours)
    async_to_sync(contend)(ours)  # a later loop: its own locks
    async_to_sync(cancel_a_waiter)(ours)
    async_to_sync(contend)(ours)


def test_messages_reach_receivers_in_loop_after_loop():
    layer = layer_of(RedisChannelLayer)

    async def round_trip(n: int) -> None:
        channel = await layer.new_channel()
        for i in range(3):
            await layer.send(channel, {"type": "test.message", "n": n, "i": i})
        got = [await asyncio.wait_for(layer.receive(channel), 10) for _ in range(3)]
        assert [(m["n"], m["i"]) for m in got] == [(n, 0), (n, 1), (n, 2)]
        # a receive left waiting when the loop ends, as a closing websocket's is
        pending = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0.05)
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)

    for n in range(4):
        async_to_sync(round_trip)(n)
