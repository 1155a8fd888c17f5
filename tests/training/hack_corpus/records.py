"""Corpus cases stored as a run's trajectories (for the monitor tests): each case's program is
its trajectory's final code and its one turn's text, on the imported HumanEval task."""

from __future__ import annotations

from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from tests.training.hack_corpus.corpus import CANONICAL, Case
from training.models import TrainingRun, Trajectory, Turn


def stored_trajectories(
    cases: list[Case], humaneval: list[dict], *, flags: dict | None = None, name: str = "monitored"
) -> list[Trajectory]:
    """One trajectory per case in a new run (step 1, group 0), in order.

    ``flags``: case name -> ``(flags, flag_evidence)`` recorded on its trajectory, as the trainer
    would have; none by default.
    """
    rows = {row["task_id"]: row for row in humaneval}
    wanted = sorted({case.task_id for case in cases}, key=lambda t: int(t.split("/")[1]))
    tasks_import(
        source="humaneval",
        task_set_name=name,
        records=[
            {
                "task_id": t,
                "prompt": rows[t]["prompt"],
                "entry_point": rows[t]["entry_point"],
                "reference_solution": rows[t]["canonical_solution"],
                "tests": rows[t]["test"],
                "where": t,
            }
            for t in wanted
        ],
    )
    task_set = task_set_get(name=name)
    versions = {v.task.task_id: v for v in task_set_versions(task_set=task_set)}
    run = TrainingRun.objects.create(
        task_set=task_set, total_steps=1, status=TrainingRun.RUNNING, config={}
    )
    stored = []
    for index, case in enumerate(cases):
        row = rows[case.task_id]
        completion = row["canonical_solution"] if case.completion == CANONICAL else case.completion
        recorded, evidence = (flags or {}).get(case.name, ([], {}))
        trajectory = Trajectory.objects.create(
            run=run,
            step=1,
            group=0,
            index_in_group=index,
            task_version=versions[case.task_id],
            status="failed",
            reward=0.0,
            flags=list(recorded),
            flag_evidence=dict(evidence),
            tests_passed=0,
            tests_total=3,
            final_code=row["prompt"] + completion,
        )
        Turn.objects.create(
            trajectory=trajectory,
            index=0,
            policy_text=completion,
            code=row["prompt"] + completion,
            observation="",
            sandbox_status="failed",
            sandbox_result={},
        )
        stored.append(trajectory)
    return stored
