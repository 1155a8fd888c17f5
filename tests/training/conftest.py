"""Fixtures of the training tests: a validated HumanEval task set and real trainer processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_library.models import EnvironmentVersion, Task, TaskVersion, TestSuiteVersion
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import task_set_pin, tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from tests.database import child_env
from training import services
from training.config import RunConfig
from training.kubernetes import trainer_command
from training.models import TrainingRun

ROOT = Path(__file__).resolve().parents[2]

# A run small enough for CI's two cores: 2 tasks x 2 trajectories per step, one tiny layer.
TINY = {
    "seed": 3,
    "sft_epochs": 2,
    "group_size": 2,
    "tasks_per_step": 2,
    "train_tasks": 3,
    "n_layer": 1,
    "n_embd": 32,
    "n_head": 2,
    "max_new_tokens": 16,
    "max_turns": 2,
    "lr": 1e-3,
}


@pytest.fixture
def trained_task_set(humaneval):
    """A task set ``resume`` of three validated HumanEval tasks (real sandboxes)."""
    rows = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "entry_point": r["entry_point"],
            "reference_solution": r["canonical_solution"],
            "tests": r["test"],
            "where": "test",
        }
        for r in humaneval[:3]
    ]
    tasks_import(source="humaneval", task_set_name="resume", records=rows)
    task_set = task_set_get(name="resume")
    task_versions_validate(
        versions=list(task_set_versions(task_set=task_set)),
        options=Options(reference_runs=1, mutants=0),
    )
    return task_set


def trainer_process(run_id: int, nproc_per_node: int = 1) -> subprocess.Popen:
    """The local backend's trainer command (under torchrun for several ranks) against the test
    database and the session's Redis and sandbox workers."""
    env = child_env(OMP_NUM_THREADS="1")
    command = trainer_command(run_id, nproc_per_node)
    return subprocess.Popen(
        [sys.executable, *command[1:]],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def launch(run: TrainingRun) -> subprocess.Popen:
    """Move a pending or interrupted run to launching, as a backend does, and start its trainer."""
    services.run_transition(run_id=run.pk, to_status=TrainingRun.LAUNCHING, reason="test launch")
    return trainer_process(run.pk, run.config.get("nproc_per_node", 1))


def finish(proc: subprocess.Popen, timeout_s: float = 420) -> str:
    """Wait for a trainer process; return its output. One still running after ``timeout_s``
    prints its threads' stacks (SIGUSR1, see ``run_trainer``), is killed, and fails the test
    with its output: where it waited."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(
            f"the trainer still ran after {timeout_s:.0f} s:\n{out[-20000:]}"
        ) from None
    return out


def wait_for(predicate, *, timeout_s: float = 300, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"trainer exited {proc.returncode} early:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def tiny_run(task_set, **overrides) -> TrainingRun:
    return services.run_create(task_set=task_set, config=RunConfig.from_dict({**TINY, **overrides}))


def one_task_run(backend: str = "local", **config) -> TrainingRun:
    """A pending run on a fresh one-task set (a valid version, as validation leaves it), without
    sandboxes."""
    env, _ = EnvironmentVersion.objects.get_or_create(
        content_hash="e" * 64, defaults={"name": "python", "runtime": "python3.11"}
    )
    suite, _ = TestSuiteVersion.objects.get_or_create(
        content_hash="s" * 64,
        defaults={"visible_tests": "", "hidden_tests": "def check(c):\n    assert c()\n"},
    )
    task = Task.objects.create(task_id=f"{backend}/{Task.objects.count()}", source="test")
    version = TaskVersion.objects.create(
        task=task,
        number=1,
        content_hash=task.task_id.lower().ljust(64, "0"),
        prompt="p",
        entry_point="f",
        reference_solution="r",
        environment=env,
        test_suite=suite,
        verdict=TaskVersion.VERDICT_VALID,
    )
    task_set = task_set_pin(name=f"{backend}-{task.pk}", versions=[version], author="test")
    return services.run_create(
        task_set=task_set, config=RunConfig.from_dict({"steps": 3, **config}), backend=backend
    )
