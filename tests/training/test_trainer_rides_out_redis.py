"""Redis lost in the middle of a run (SIGKILL, after step 1's record). Restarted (empty) within
the broker wait: the trainer waits, retries, and the run succeeds with every step recorded once.
Not restarted: the run ends ``interrupted`` (resumable), never ``failed``, its checkpoint usable,
and once Redis is back a relaunch trains exactly the steps left. A Redis and a supervised sandbox
worker of the test's own; a real trainer process."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from console.management.stack import Stack
from tests.database import child_env
from tests.faults import PrivateRedis, sandbox_worker
from tests.training.conftest import ROOT, finish, tiny_run, wait_for
from training import services
from training.checkpoint import latest_checkpoint
from training.kubernetes import trainer_command
from training.models import StepMetric, TrainingRun
from training.paths import run_dir

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def launch_on(run: TrainingRun, redis_url: str, **env: str) -> subprocess.Popen:
    """The run's trainer (as the local backend starts it) on the test's own Redis."""
    services.run_transition(run_id=run.pk, to_status=TrainingRun.LAUNCHING, reason="test launch")
    return subprocess.Popen(
        [sys.executable, *trainer_command(run.pk, 1)[1:]],
        cwd=ROOT,
        env=child_env(OMP_NUM_THREADS="1", REDIS_URL=redis_url, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def steps_of(run: TrainingRun) -> list[int]:
    return list(StepMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))


@pytest.fixture
def private():
    server = PrivateRedis().start()
    try:
        yield server
    finally:
        server.close()


def test_redis_killed_and_restarted_mid_run_costs_nothing(trained_task_set, private):
    with Stack(supervise=True) as stack:
        sandbox_worker(stack, private, env=child_env())
        run = tiny_run(trained_task_set, steps=3)
        proc = launch_on(run, private.url, CRUCIBLE_BROKER_WAIT_S="120")
        wait_for(lambda: StepMetric.objects.filter(run=run, step=1).exists(), proc=proc)
        private.kill()
        time.sleep(3)  # the trainer is in step 2's rollouts, without its broker
        private.start()  # empty: what was queued is gone
        out = finish(proc)
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert "lost Redis" in out and "Redis answers again; retrying" in out, out
    assert steps_of(run) == [1, 2, 3]


def test_redis_gone_past_the_broker_wait_interrupts_the_run_resumably(trained_task_set, private):
    with Stack(supervise=True) as stack:
        sandbox_worker(stack, private, env=child_env())
        run = tiny_run(trained_task_set, steps=3)
        proc = launch_on(run, private.url, CRUCIBLE_BROKER_WAIT_S="5")
        wait_for(lambda: latest_checkpoint(run_dir(run.pk)) is not None, proc=proc)
        private.kill()
        out = finish(proc)
        run.refresh_from_db()
        assert proc.returncode != 0
        assert run.status == TrainingRun.INTERRUPTED, (run.status, run.status_reason, out)
        assert "lost the broker (Redis)" in run.status_reason
        assert "CRUCIBLE_BROKER_WAIT_S" in run.status_reason
        recorded = steps_of(run)
        assert recorded and recorded == list(range(1, len(recorded) + 1))

        private.start()
        out = finish(launch_on(run, private.url))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert steps_of(run) == [1, 2, 3]
    assert run.summary["resumed_from_step"] >= 1
