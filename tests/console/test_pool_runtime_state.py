"""The sandbox pool panel says what each runtime's row means: a runtime with live workers is
serving; one that nobody uses (no worker, nothing queued, no trainer asking: Node.js on a
Python-only setup) is shown as not in use, not as an alarm; only work waiting with no live
worker is red. Read from the real Redis."""

import json

from console.dashboard_views import pool_runtime_state
from sandboxes import pool_stats as P
from sandboxes import queue as Q


def test_unused_serving_and_starved_runtimes():
    client = Q.connection()
    unused = P.runtime_stats("cobol", client)  # a runtime no worker ever served
    assert pool_runtime_state(unused) == "unused"
    assert pool_runtime_state(P.runtime_stats("python", client)) == "serving"
    key = Q.pending_key("cobol")
    client.lpush(key, json.dumps({"id": "waiting"}))
    try:
        assert pool_runtime_state(P.runtime_stats("cobol", client)) == "starved"
    finally:
        client.delete(key)
    assert pool_runtime_state(P.runtime_stats("cobol", client)) == "unused"


def test_the_pool_api_carries_the_state_of_every_runtime(client):
    data = client.get("/api/sandboxes/pool/").json()
    assert data["runtimes"]["python"]["state"] == "serving"
    assert all(r["state"] in ("serving", "unused", "starved") for r in data["runtimes"].values())
