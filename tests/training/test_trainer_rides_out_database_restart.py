"""PostgreSQL "restarts" under a real trainer run: right after step 1 is recorded, the test
database refuses new connections (``ALLOW_CONNECTIONS false``, which binds superusers too) and
every connection to it but the test's own is terminated, for 4 s, as a restart does to its
clients. The trainer waits, reconnects and goes on: the run succeeds with every step recorded
once. PostgreSQL only (CI runs the suite on it too); the session's Redis and sandbox workers."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from tests.training.conftest import finish, launch, tiny_run, wait_for
from training.models import StepMetric, TrainingRun

pytestmark = [pytest.mark.slow, pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


def outage(seconds: float) -> None:
    """Refuse connections to the test database and drop every one to it, for ``seconds``, from a
    connection to the ``postgres`` database (PostgreSQL refuses to close the one it is in)."""
    import psycopg  # noqa: PLC0415 (PostgreSQL only)

    settings = connection.settings_dict
    name = settings["NAME"]
    with psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    ) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )
                time.sleep(0.2)
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    connection.close()  # the test's own connection was dropped too


def test_a_database_restart_mid_run_costs_nothing(trained_task_set):
    if connection.vendor != "postgresql":
        pytest.skip("a database restart is a PostgreSQL fault (SQLite has no server)")
    run = tiny_run(trained_task_set, steps=3)
    proc = launch(run)
    wait_for(lambda: StepMetric.objects.filter(run=run, step=1).exists(), proc=proc)
    outage(4.0)
    out = finish(proc)
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert "lost the database" in out and "the database answers again; retrying" in out, out
    steps = list(StepMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))
    assert steps == [1, 2, 3]
