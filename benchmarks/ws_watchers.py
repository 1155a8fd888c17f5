"""Websocket watchers of one run, in a process of their own (``benchmarks/load.py``'s fan-out):
``N`` aiohttp clients connect to a run's websocket and time each step event's arrival, so their
reading is not starved by the writer and the request load in the benchmark's own process.

Run: ``python -m benchmarks.ws_watchers WS_URL ORIGIN CLIENTS OUT_FILE``. Once every client has
connected (its backfill came) or failed, prints one JSON line ``{"connected": N, "failed":
[kinds]}``; on SIGINT or SIGTERM, writes ``OUT_FILE``: ``{"receipts": [[step, monotonic_s],
...]}`` (``time.monotonic()``: CLOCK_MONOTONIC, the same clock in every process on the
machine) and exits.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

import aiohttp


async def watch(ws_url: str, origin: str, clients: int, out_file: str) -> None:
    receipts: list[tuple[int, float]] = []
    connected, failed = [0], []
    ready = asyncio.Event()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def settled() -> None:
        if connected[0] + len(failed) == clients:
            ready.set()

    async def client(session) -> None:
        try:
            async with session.ws_connect(ws_url, headers={"Origin": origin}, max_msg_size=0) as ws:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.TEXT:
                        break
                    now = time.monotonic()
                    event = json.loads(message.data)
                    if event.get("kind") == "backfill":
                        connected[0] += 1
                        settled()
                    elif event.get("kind") == "step":
                        receipts.append((event["step"], now))
        except (aiohttp.ClientError, TimeoutError) as exc:
            failed.append(type(exc).__name__)
            settled()

    # limit=0: a websocket holds its connection for its life; the default pool of 100 would
    # leave the 101st client waiting
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = [asyncio.create_task(client(session)) for _ in range(clients)]
        try:
            await asyncio.wait_for(ready.wait(), timeout=120)
        except TimeoutError:
            pass  # reported: the clients that did connect are measured
        print(json.dumps({"connected": connected[0], "failed": sorted(set(failed))}), flush=True)
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    with open(out_file, "w") as handle:
        json.dump({"receipts": receipts}, handle)


if __name__ == "__main__":
    import uvloop  # the server's loop too: the watchers must cost little CPU

    url, origin_arg, count, out = sys.argv[1:5]
    uvloop.install()
    asyncio.run(watch(url, origin_arg, int(count), out))
