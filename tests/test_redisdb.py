"""The suite's own Redis databases (tests/redisdb.py): with REDIS_URL on a shared server and up to
four pytest-xdist workers (each consuming the database N above the configured one), the
databases tests take for themselves are none of the workers' and not each other's."""

import pytest
from django.test import override_settings

from tests.redisdb import isolated_db, sessions_dbs


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("configured", [10, 13, 14])
def test_private_databases_miss_every_workers_queue(monkeypatch, workers, configured):
    for index in range(workers):
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:6379/{configured + index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
        with override_settings(REDIS_URL=f"redis://127.0.0.1:6379/{configured + index}"):
            taken = sessions_dbs()
            private = {isolated_db(13), isolated_db(14)}
        assert taken == set(range(configured, configured + workers))
        assert len(private) == 2 and not private & taken and min(private) >= 0


def test_the_embedded_redis_is_each_workers_own(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    with override_settings(REDIS_URL="unix:///tmp/x/redis.sock?db=0"):
        assert sessions_dbs() == {0}
        assert (isolated_db(13), isolated_db(14)) == (13, 14)
