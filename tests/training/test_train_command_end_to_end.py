"""From a fresh shell: import, validate and train through Celery, each command starting the
embedded Redis and a Celery worker for its own duration and stopping them after."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--set",
    "sft_epochs=2",
    "--set",
    "group_size=2",
    "--set",
    "tasks_per_step=2",
    "--set",
    "train_tasks=2",
    "--set",
    "n_layer=1",
    "--set",
    "n_embd=32",
    "--set",
    "n_head=2",
    "--set",
    "max_new_tokens=24",
]


@pytest.fixture
def fresh_home(tmp_path, humaneval, write_jsonl):
    """A fresh var directory (own SQLite file, own embedded Redis socket) and a 6-task slice."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["CRUCIBLE_VAR_DIR"] = str(tmp_path / "var")
    sliced = write_jsonl(humaneval[:6], "slice.jsonl")

    def manage(*args, check=True, timeout=600):
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n"
                f"{proc.stderr}"
            )
        return proc

    manage("migrate", "--verbosity", "0")
    manage("import_tasks", "humaneval", "--path", str(sliced))
    return manage, tmp_path / "var"


@pytest.mark.slow
def test_train_headless_json_runs_through_celery_and_cleans_up(fresh_home):
    manage, var = fresh_home
    report = json.loads(manage("validate_tasks", "--taskset", "humaneval", "--json").stdout)
    assert report["counts"] == {"valid": 6}
    out = manage("train", "--taskset", "humaneval", "--steps", "2", "--headless", "--json", *TINY)
    summary = json.loads(out.stdout)
    assert summary["status"] == "succeeded", summary
    # stdout is the summary alone; the run's status, the warm start's progress (here the last
    # epoch at least: two tiny epochs pass within one poll) and the steps went to stderr
    run_id = summary["run_id"]
    for line in (
        f"run {run_id} launching",
        f"run {run_id} running: SFT warm start, epoch 2 of 2",
        "step 2: reward/mean=",
        f"run {run_id} succeeded",
    ):
        assert line in out.stderr, out.stderr
    assert isinstance(summary["run_id"], int)
    assert [s["step"] for s in summary["steps"]] == [1, 2]
    assert all(0.0 <= s["reward_mean"] <= 1.0 for s in summary["steps"])
    assert summary["summary"]["sft/examples"] == 6
    # the services this command started are gone again
    assert not (var / "redis.sock").exists() or not _answers(var / "redis.sock")
    assert "celery" in (var / "logs" / "celery.log").read_text()
    checkpoint = Path(summary["summary"]["checkpoint"])
    assert checkpoint.parent.parent == var / "runs" and checkpoint.parent.name.startswith(
        f"{summary['run_id']}-"
    )
    assert (checkpoint / "config.json").exists()


@pytest.mark.slow
def test_bad_config_and_missing_task_set_are_refused_before_launch(fresh_home):
    manage, _var = fresh_home
    refused = manage(
        "train",
        "--taskset",
        "humaneval",
        "--steps",
        "2",
        "--set",
        "model_path=/no/such/model",
        check=False,
    )
    assert (
        refused.returncode != 0
        and "model_path" in refused.stderr
        and "Traceback" not in refused.stderr
    )
    missing = manage("train", "--taskset", "nope", "--steps", "2", check=False)
    assert missing.returncode != 0 and "task set 'nope' not found" in missing.stderr
    unvalidated = manage("train", "--taskset", "humaneval", "--steps", "2", check=False)
    assert unvalidated.returncode != 0 and "validate_tasks" in unvalidated.stderr


@pytest.mark.slow
def test_a_run_that_fails_is_reported_and_recorded(fresh_home):
    manage, var = fresh_home
    manage("validate_tasks", "--taskset", "humaneval")
    # What the launch can check is refused before a run exists: every prompt is too long.
    refused = manage(
        "train", "--taskset", "humaneval", "--steps", "2", "--headless", "--json", *TINY,
        "--set", "max_prompt_tokens=1", check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and refused.stdout == ""
    assert "max_prompt_tokens" in refused.stderr and "would train on nothing" in refused.stderr
    assert "Traceback" not in refused.stderr
    # What only the trainer finds fails the run, recorded: demonstrations of no task of the run.
    other = var / "sft-data" / "other.jsonl"  # where demonstrations may be read from
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_text(json.dumps({"task_id": "Elsewhere/0", "completion": "pass"}) + "\n")
    out = manage(
        "train", "--taskset", "humaneval", "--steps", "2", "--headless", "--json", *TINY,
        "--set", "sft_data=other.jsonl", check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "sft_data" in out.stderr and "Traceback" not in out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "failed" and summary["steps"] == []


def _answers(sock: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


@pytest.mark.slow
def test_stopping_train_interrupts_the_run_and_leaves_no_trainer(fresh_home):
    manage, var = fresh_home
    manage("validate_tasks", "--taskset", "humaneval")
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["CRUCIBLE_VAR_DIR"] = str(var)
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "train",
            "--taskset",
            "humaneval",
            "--steps",
            "50",
            "--headless",
            "--set",
            "sft_epochs=200",
            "--set",
            "n_layer=1",
            "--set",
            "n_embd=32",
            "--set",
            "n_head=2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().startswith("launched run 1")
    query = (
        "from training.models import TrainingRun as T; r = T.objects.get(pk=1); print(r.status, "
        "r.backend_ref)"
    )
    deadline = time.monotonic() + 60
    while True:
        status, ref = manage("shell", "-v", "0", "-c", query).stdout.split()
        if status == "running":
            break
        assert time.monotonic() < deadline, f"run never started: {status}"
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "interrupted" in err and "Traceback" not in err
    status, _ref = manage("shell", "-v", "0", "-c", query).stdout.split()
    assert status == "interrupted"
    trainer_pid = int(ref.split(":")[1].split("@")[0])  # pid:N@HOST
    time.sleep(0.5)
    assert (
        not Path(f"/proc/{trainer_pid}").exists()
        or "zombie" in Path(f"/proc/{trainer_pid}/status").read_text().lower()
    ), "the trainer outlived the command that launched it"
