"""Seed data of the review tests: the roles as the migrations make them, users, and a run whose
trajectories are written in bulk (as a trainer's steps leave them) over imported HumanEval tasks."""

from __future__ import annotations

import importlib

from django.apps import apps as django_apps
from django.contrib.auth.models import Group, User

from tasks_library.models import TaskVersion
from tasks_library.selectors import task_set_get, task_set_versions
from tasks_library.services import tasks_import
from training.models import MonitorScore, TrainingRun, Trajectory

PASSWORD = "correct horse battery"
ROLE_GROUPS = {
    "curator": "curators",
    "viewer": "viewers",
    "operator": "operators",
    "reviewer": "reviewers",
}


def make_roles() -> None:
    """The four groups, as the migrations make them (a transactional test's flush drops them)."""
    importlib.import_module("tasks_library.migrations.0003_curator_viewer_groups").create_groups(
        django_apps, None
    )
    # console 0002 granted the review models' permissions while they were the console app's;
    # review 0001 moved them to the review app, where they are now.
    roles = importlib.import_module("console.migrations.0002_roles")
    for name, grants in roles.GRANTS.items():
        moved = [("review" if app == "console" else app, *rest) for app, *rest in grants]
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*roles._permissions(django_apps, moved))


def make_user(name: str, role: str | None, *, password: str | None = None) -> User:
    """A user of ``role`` (curator, viewer, operator, reviewer, admin, or None: no group); without a
    password (tests sign in with ``force_login``) unless one is given, since hashing one is slow."""
    if role == "admin":
        return User.objects.create_superuser(username=name, email="", password=password)
    user = User.objects.create_user(username=name, password=password)
    if role:
        user.groups.add(Group.objects.get(name=ROLE_GROUPS[role]))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions


def seed_run(
    humaneval, *, name: str = "review", tasks: int = 4
) -> tuple[TrainingRun, list[TaskVersion]]:
    """A running run over the first ``tasks`` HumanEval tasks (imported, marked valid without the
    sandbox)."""
    rows = [
        {
            "task_id": r["task_id"],
            "prompt": r["prompt"],
            "entry_point": r["entry_point"],
            "reference_solution": r["canonical_solution"],
            "tests": r["test"],
            "where": "test",
        }
        for r in humaneval[:tasks]
    ]
    tasks_import(source="humaneval", task_set_name=name, records=rows)
    task_set = task_set_get(name=name)
    versions = list(task_set_versions(task_set=task_set))
    TaskVersion.objects.filter(pk__in=[v.pk for v in versions]).update(
        verdict=TaskVersion.VERDICT_VALID
    )
    run = TrainingRun.objects.create(
        task_set=task_set, total_steps=5, status=TrainingRun.RUNNING, config={}
    )
    run.task_versions.set(versions)
    return run, [TaskVersion.objects.select_related("task").get(pk=v.pk) for v in versions]


def seed_trajectories(run, versions, specs: list[dict]) -> list[Trajectory]:
    """One trajectory per spec, bulk-created; spec keys: ``version`` (index into ``versions``,
    default 0), ``reward`` (default 0.5), ``flags``, ``tests`` ((passed, total), default from the
    reward over 4), ``monitors`` ([(monitor, score)]), ``step`` (default 1), ``code``."""
    rows = []
    for i, spec in enumerate(specs):
        version = versions[spec.get("version", 0)]
        reward = spec.get("reward", 0.5)
        passed, total = spec.get("tests", (round(reward * 4), 4))
        flags = list(spec.get("flags", []))
        rows.append(
            Trajectory(
                run=run,
                step=spec.get("step", 1),
                group=i // 4,
                index_in_group=i % 4,
                task_version=version,
                status="ok" if passed == total else "failed",
                reward=reward,
                reward_components={"correctness": reward},
                flags=flags,
                flag_evidence={f: {"detector": f, "line": 3} for f in flags},
                tests_passed=passed,
                tests_total=total,
                final_code=spec.get(
                    "code", version.prompt + f"    return None  # trajectory {i}\n"
                ),
            )
        )
    made = Trajectory.objects.bulk_create(rows)
    MonitorScore.objects.bulk_create(
        MonitorScore(trajectory=t, monitor=monitor, score=score, reason=f"{monitor} says {score}")
        for t, spec in zip(made, specs)
        for monitor, score in spec.get("monitors", [])
    )
    return made
