"""The disk holding a run's directory fills up while a checkpoint is written: the run ends
``interrupted`` saying so (the disk, the free space, the last good checkpoint), the half-written
checkpoint is removed, the last good one loads, and once space is freed a relaunch trains the steps
left, none recorded twice. A real tmpfs of 256 MB mounted on the run's directory (root only)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.training.conftest import finish, launch, tiny_run
from training.checkpoint import checkpoints_dir, latest_checkpoint, read_model_state
from training.models import StepMetric, TrainingRun
from training.paths import run_dir

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def small_disk():
    """Mount a 256 MB tmpfs on a directory; unmounted at the end."""
    mounted = []

    def mount(path):
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(path)], capture_output=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (root only): {done.stderr.decode()[:200]}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory) -> None:
    """Write zeros into ``directory`` until its file system is full."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * (1 << 16))
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_during_a_checkpoint_interrupts_the_run_and_keeps_the_last_good_one(
    trained_task_set, small_disk
):
    run = tiny_run(trained_task_set, steps=3)
    directory = small_disk(run_dir(run.pk))
    proc = launch(run)
    first = checkpoints_dir(directory) / "step-000001"
    deadline = time.monotonic() + 300
    while not first.exists():  # polled tightly: the pause below must come before step 2 ends
        assert proc.poll() is None and time.monotonic() < deadline, finish(proc, timeout_s=5)
        time.sleep(0.005)
    # The trainer is paused while the disk fills: filling 256 MB takes longer than a tiny step,
    # and step 2's checkpoint must find no room, not race the filler for the last of it.
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        fill(directory)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out = finish(proc)
    run.refresh_from_db()
    assert proc.returncode != 0
    assert run.status == TrainingRun.INTERRUPTED, (run.status, run.status_reason, out)
    reason = run.status_reason
    assert "the disk is full" in reason and "checkpoint of step 2" in reason, reason
    assert str(first) in reason and "is intact" in reason, reason
    assert not (checkpoints_dir(directory) / "step-000002.tmp").exists()
    assert latest_checkpoint(directory) == first
    assert read_model_state(first)  # loads

    (directory / "filler").unlink()
    out = finish(launch(run))
    run.refresh_from_db()
    assert run.status == TrainingRun.SUCCEEDED, out
    assert run.summary["resumed_from_step"] == 1
    steps = list(StepMetric.objects.filter(run=run).order_by("step").values_list("step", flat=True))
    assert steps == [1, 2, 3]
