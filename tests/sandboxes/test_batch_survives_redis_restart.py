"""Redis killed (SIGKILL) in the middle of a sandbox batch and started again empty: the batch
waits for it, queues again what was not answered, and every request comes back answered; a Redis
that stays away longer than the broker wait ends in ``BrokerLost``, naming the setting. A Redis and
a supervised sandbox worker of the test's own; nothing mocked."""

from __future__ import annotations

import threading
import time

import pytest
from django.test import override_settings

from console.management.stack import Stack
from core.broker import BrokerLost, broker_retry
from sandboxes import queue as Q
from sandboxes import result as R
from tests.faults import PrivateRedis, sandbox_worker

TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
SLOW_SQUARE = "import time\ndef square(x):\n    time.sleep(1.0)\n    return x * x\n"


@pytest.fixture
def private():
    server = PrivateRedis().start()
    Q.connection.cache_clear()
    try:
        with override_settings(REDIS_URL=server.url, CRUCIBLE_BROKER_WAIT_S=60):
            yield server
    finally:
        Q.connection.cache_clear()
        server.close()


def restart_later(server: PrivateRedis, after_s: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(after_s), server.start()))
    thread.start()
    return thread


def test_a_batch_rides_out_a_redis_killed_and_restarted_empty(private):
    with Stack(supervise=True) as stack:
        sandbox_worker(stack, private, env={})
        batch = Q.submit([Q.python_tests(SLOW_SQUARE, TESTS, "square") for _ in range(6)])
        time.sleep(0.5)  # the worker took the first ones
        private.kill()
        restarted = restart_later(private, 2.0)  # empty: the queued requests are gone
        results = batch.wait(timeout_s=None)
        restarted.join()
    assert [r.status for r in results] == [R.OK] * 6, [r.detail for r in results]
    assert all(r.tests_passed == 2 for r in results)


def test_broker_retry_waits_for_redis_then_gives_up_after_the_broker_wait(private):
    client = private.client()
    client.set("n", 0)
    private.kill()
    restarted = restart_later(private, 1.5)
    started = time.monotonic()
    assert broker_retry(lambda: client.incr("n"), what="a test") == 1  # a fresh Redis
    assert time.monotonic() - started >= 1.0
    restarted.join()

    private.kill()
    with override_settings(CRUCIBLE_BROKER_WAIT_S=1):
        with pytest.raises(BrokerLost, match="CRUCIBLE_BROKER_WAIT_S") as lost:
            broker_retry(lambda: client.incr("n"), what="a test's counter")
    assert "a test's counter: Redis did not answer for 1 s" in str(lost.value)
