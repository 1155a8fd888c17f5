"""``up --scenario terminal``: an agent trained on terminal tasks, its reward from their verifiers.

Imports the shipped terminal sets (``tasks_library/data/terminal``: system operations, data
analysis, office files, tool use; Harbor's layout) as one task set each, builds their
environments (a Debian root with each set's Debian packages, built in a user namespace, and its
pinned Python packages; a cache hit after the first time), validates every version that has no
verdict yet (the reference solution N times, the untouched state once), and pins a mix for the
demo run: the trainable tasks with the shortest reference solutions, taken from each family in
turn (so every family is in the run).
"""

from __future__ import annotations

import time

from console.scenario_data import environments_built
from tasks_library.selectors import awaiting_validation, task_set_get, task_set_versions
from tasks_library.services import task_set_pin
from tasks_library.terminal.library import task_directories, terminal_sets, terminal_tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate

TERMINAL_DEMO_SET = "terminal-demo"
TERMINAL_TASKS = 4  # one per family: the warm start and RL on the same tasks
TERMINAL_CONFIG = {
    "rollout_mode": "agent",
    # The demonstrations are scripts of hundreds of tokens, which a small policy must write
    # whole: at 0.7 and 1e-4 its samples broke them and the reward fell to 0 by step 4 (run of
    # 2026-12-06); at 0.4, 80 epochs and 5e-5 it held at 0.58 to 0.67.
    "sft_epochs": 80,
    "sft_batch_size": 4,
    "lr": 5e-5,
    "ppo_epochs": 2,
    "tasks_per_step": TERMINAL_TASKS,
    "train_tasks": TERMINAL_TASKS,
    "group_size": 4,
    "max_turns": 4,
    "max_new_tokens": 384,
    "max_tokens": 2048,
    # the instructions run to 300 tokens and more: a smaller cap left the office task out
    "max_prompt_tokens": 768,
    "temperature": 0.4,
}


def terminal_task_set(*, options: Options, say, tasks: int = TERMINAL_TASKS) -> tuple:
    """Import, build, validate and pin; returns ``(task set, summary dict)``.

    Raises:
        ValueError: no shipped set, or no version is trainable (the message says why).
    """
    sets = {name: path for name, path in terminal_sets().items() if name != "all"}
    if not sets:
        raise ValueError("no terminal task set is shipped in tasks_library/data/terminal")
    by_family: dict[str, list] = {}
    for name, path in sets.items():
        t0 = time.monotonic()
        report = terminal_tasks_import(task_directories(path), task_set_name=f"terminal-{name}")
        by_family[name] = list(task_set_versions(task_set=task_set_get(name=f"terminal-{name}")))
        say(
            f"imported {report.tasks} {name} terminal tasks ({report.new_versions} new versions) "
            f"in {time.monotonic() - t0:.1f} s"
        )
    versions = [v for family in by_family.values() for v in family]
    builds = environments_built(versions, say=say)
    t0 = time.monotonic()
    waiting = awaiting_validation(versions)  # a second run validates only what changed
    if waiting:
        task_versions_validate(versions=waiting, options=options)
    for version in versions:
        version.refresh_from_db()
    verdicts = {
        name: {
            verdict: sum(v.verdict == verdict for v in family)
            for verdict in sorted({v.verdict for v in family})
        }
        for name, family in by_family.items()
    }
    say(
        f"validated {len(waiting)} terminal task versions ({len(versions) - len(waiting)} kept "
        f"their verdicts) in {time.monotonic() - t0:.1f} s: {verdicts}"
    )
    shortest = {
        name: sorted(
            (v for v in family if v.trainable),
            key=lambda v: (len(v.reference_solution), v.task.task_id),
        )
        for name, family in by_family.items()
    }
    demo = []
    while len(demo) < tasks and any(shortest.values()):
        for family in shortest.values():
            if family and len(demo) < tasks:
                demo.append(family.pop(0))
    if not demo:
        raise ValueError(f"no terminal task is trainable: {verdicts}")
    task_set = task_set_pin(
        name=TERMINAL_DEMO_SET,
        versions=demo,
        description="the terminal sets' trainable tasks with the shortest reference solutions",
    )
    summary = {
        "imported": len(versions),
        "trainable": sum(v.trainable for v in versions),
        "quarantined": sum(v.quarantined for v in versions),
        "verdicts": verdicts,
        "environments": builds,
        "demo_tasks": [v.task.task_id for v in demo],
    }
    return task_set, summary
