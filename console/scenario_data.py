"""``up --scenario data``: tasks that need their environment, trained end to end.

Imports the shipped data-analysis set (numpy/pandas, output-match and custom-checker verifiers,
in an environment pinning both) and the python-versions set (Python 3.13, in the Debian root's
interpreter), builds each environment version into the store (a cache hit after the first
time; the build's seconds and sizes are printed and kept on the environment's page), validates
every version in its environment, pins the trainable ones as ``data-demo`` and returns it for
the demo run.
"""

from __future__ import annotations

import time

from tasks_library.environments import EnvironmentUnavailable, environment_build
from tasks_library.importers.crucible import read_crucible, shipped_path
from tasks_library.selectors import awaiting_validation, task_set_get, task_set_versions
from tasks_library.services import task_set_pin, tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate

DATA_TASK_SETS = {"data-analysis": "data_analysis", "python-versions": "python_versions"}
DATA_DEMO_SET = "data-demo"
DATA_CONFIG = {
    "sft_epochs": 12,
    "sft_batch_size": 4,
    "lr": 1e-4,
    "ppo_epochs": 2,
    "tasks_per_step": 4,
    "train_tasks": 11,
    "group_size": 4,
    "max_turns": 1,
    "max_new_tokens": 256,
}


def environments_built(versions, *, say) -> dict:
    """Build each distinct environment of ``versions`` (a cache hit after the first time) and
    say how it went; returns ``{environment: {"runtime", "key", "cache_hit", "seconds",
    "size_mib", "debian_packages"}}``, or ``{"error"}`` for one that cannot be built (its
    versions stay unvalidated)."""
    builds = {}
    for environment in {v.environment_id: v.environment for v in versions}.values():
        t0 = time.monotonic()
        try:
            built = environment_build(environment=environment)
        except EnvironmentUnavailable as exc:
            say(f"environment {environment}: {exc}")
            builds[str(environment)] = {"error": str(exc)}
            continue
        seconds = round(time.monotonic() - t0, 1)
        builds[str(environment)] = {
            "runtime": environment.runtime,
            "key": built.key,
            "cache_hit": built.cache_hit,
            "seconds": seconds,
            "size_mib": round((environment.size_bytes or 0) / 2**20, 1),
            "debian_packages": list(environment.debian_packages),
        }
        debian = ", ".join(environment.debian_packages)
        say(
            f"environment {environment} ({environment.runtime}, "
            f"{len(environment.packages)} pinned packages"
            + (f", Debian packages {debian}" if debian else "")
            + "): "
            + ("cache hit" if built.cache_hit else "built")
            + f" in {seconds} s, {builds[str(environment)]['size_mib']} MiB"
        )
    return builds


def data_task_set(*, options: Options, say) -> tuple:
    """Import, build, validate and pin; returns ``(task set, summary dict)``.

    Raises:
        ValueError: no version is trainable (the message names the environments' errors).
    """
    versions = []
    for name, file in DATA_TASK_SETS.items():
        tasks_import(source=name, task_set_name=name, records=read_crucible(shipped_path(file)))
        versions += list(task_set_versions(task_set=task_set_get(name=name)))
    builds = environments_built(versions, say=say)
    t0 = time.monotonic()
    waiting = awaiting_validation(versions)  # a second run validates only what changed
    if waiting:
        task_versions_validate(versions=waiting, options=options)
    trainable = [v for v in versions if v.trainable]
    say(
        f"validated {len(waiting)} data and Python 3.13 task versions in their environments "
        f"({len(versions) - len(waiting)} kept their verdicts): {len(trainable)} trainable "
        f"({time.monotonic() - t0:.1f} s)"
    )
    if not trainable:
        raise ValueError(
            "no data task version is trainable: "
            + "; ".join(r for v in versions for r in v.verdict_reasons[:1])
        )
    task_set = task_set_pin(
        name=DATA_DEMO_SET,
        versions=trainable,
        description="numpy/pandas tasks and Python 3.13 tasks, each in its environment",
    )
    summary = {
        "environments": builds,
        "verdicts": {
            verdict: sum(1 for v in versions if v.verdict == verdict)
            for verdict in sorted({v.verdict for v in versions})
        },
        "trainable": len(trainable),
    }
    return task_set, summary
