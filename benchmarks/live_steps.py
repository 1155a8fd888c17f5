"""The watched run's trainer, in a process of its own (``benchmarks/load.py``'s fan-out): it
records a small step of the run every ``PERIOD_S`` seconds with ``training.services.step_record``
(the trainer's own call) while the benchmark's process writes the big step. A team's trainers
are processes of their own; in one process with the big step's writer, the live step's broadcast
waited for the writer's thread to let go of the interpreter lock (up to 80 ms a step measured),
which is the benchmark's own contention, not the fan-out's.

Run: ``python -m benchmarks.live_steps RUN_ID TASK_VERSION_ID TRAJECTORIES PERIOD_S STOP_FILE
OUT_FILE`` with the benchmark's environment (``CRUCIBLE_VAR_DIR``, ``DATABASE_URL``,
``REDIS_URL``, ``CRUCIBLE_CHANNEL_PREFIX``). Records step 1 (not measured: what a trainer's
first call loads), prints ``ready``, then records steps 2, 3, ... until ``STOP_FILE`` exists,
and writes ``OUT_FILE``: ``{"called": {step: s}, "broadcast": {step: s}}``, when
``step_record`` was called and when it broadcast the step's event (``time.monotonic()``:
CLOCK_MONOTONIC, the same clock in every process).
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str]) -> None:
    run_id, version_id, trajectories = int(argv[0]), int(argv[1]), int(argv[2])
    period_s, stop_file, out_file = float(argv[3]), Path(argv[4]), Path(argv[5])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django  # noqa: PLC0415 (after the environment)

    django.setup()
    from benchmarks.console_streaming import rollouts_for  # noqa: PLC0415 (after django.setup)
    from training import services  # noqa: PLC0415

    called: dict[int, float] = {}
    broadcast: dict[int, float] = {}
    original = services.broadcast_run_event

    def timed_broadcast(run, event):
        # the moment the step's event leaves (after the commit): the fan-out counts from here
        if run == run_id and event.get("kind") == "step":
            broadcast[event["step"]] = time.monotonic()
        original(run, event)

    version = types.SimpleNamespace(pk=version_id)  # rollouts_for needs its id only
    # a trainer in the middle of its run: step 1, unmeasured, loads what a first call loads
    services.step_record(
        run_id=run_id, step=1, rollouts=rollouts_for(version, 1, trajectories), metrics={}
    )
    services.broadcast_run_event = timed_broadcast
    print("ready", flush=True)
    step = 1
    while not stop_file.exists():
        step += 1
        small = rollouts_for(version, step, trajectories)
        called[step] = time.monotonic()
        services.step_record(run_id=run_id, step=step, rollouts=small, metrics={})
        deadline = time.monotonic() + period_s
        while time.monotonic() < deadline and not stop_file.exists():
            time.sleep(0.01)
    out_file.write_text(json.dumps({"called": called, "broadcast": broadcast}))


if __name__ == "__main__":
    main(sys.argv[1:])
