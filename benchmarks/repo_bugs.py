"""Generated repository tasks from real projects: how many, how valid, how long per task.

For each project of ``tasks_library/data/repo_bugs_projects.json`` (``--quick``: inflection
only), generates ``--per-project`` tasks (``import_tasks repo-bugs``'s path: the sdist fetched
with pip, the suite run in a sandbox, bugs kept when 1 to ``--max-failing`` tests fail), imports
them as repository task versions, then grades each one twice with the repository grader
(``sandboxes.repository.grade_repository``, a fresh sandbox per grading): the reference patch
applied must resolve it, and the workspace as given (the empty patch) must fail every
FAIL_TO_PASS id and pass every PASS_TO_PASS id. Prints JSON: per project, tasks made, bugs tried
and why the others were dropped, validated counts and seconds per task (generation, and the two
gradings).

    .venv/bin/python benchmarks/repo_bugs.py [--quick] [--per-project 14] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import parse_args, private_var_dir


def validate(record, environment: dict) -> dict:
    """Grade ``record``'s reference patch and its empty patch; what each gave."""
    from sandboxes.repository import (  # noqa: PLC0415 (after django.setup)
        RepositoryTests,
        apply_patch,
        grade_repository,
        is_test_path,
    )

    tests = RepositoryTests(
        fail_to_pass=tuple(record.fail_to_pass),
        pass_to_pass=tuple(record.pass_to_pass),
        test_files={p: c for p, c in record.files.items() if is_test_path(p)},
        hidden_files=record.hidden_files,
        test_command=record.test_command,
    )
    started = time.monotonic()
    fixed = grade_repository(
        apply_patch(record.files, record.reference_patch), tests, environment=environment
    )
    empty = grade_repository(record.files, tests, environment=environment)
    f2p_failed = all(empty.per_id.get(i) != "passed" for i in record.fail_to_pass)
    p2p_passed = all(empty.per_id.get(i) == "passed" for i in record.pass_to_pass)
    return {
        "reference_resolves": fixed.resolved,
        "empty_fails_every_fail_to_pass": empty.status == "ok" and f2p_failed,
        "empty_passes_every_pass_to_pass": empty.status == "ok" and p2p_passed,
        "grading_seconds": (time.monotonic() - started) / 2,
        "detail": "" if fixed.resolved else fixed.detail[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-project", type=int, default=14, help="tasks asked per project")
    parser.add_argument(
        "--projects", default="", help="comma-separated NAME==VERSION (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-failing", type=int, default=10)
    parser.add_argument("--var-dir", default="", help="keep the database here (default: temporary)")
    args = parse_args(parser, {"per_project": 3, "projects": "inflection==0.5.1"})
    os.environ.setdefault("CRUCIBLE_ENVIRONMENT_STORE", "/var/cache/crucible/environments")
    with private_var_dir(args.var_dir):
        from console.core.stack import Stack  # noqa: PLC0415 (after django.setup)
        from tasks_library.environments import (  # noqa: PLC0415
            environment_get,
            environment_request,
        )
        from tasks_library.generators.repo_bugs import (  # noqa: PLC0415
            environment_content,
            known_projects,
            repo_bugs_import,
        )

        pins = [p.strip() for p in args.projects.split(",") if p.strip()] or [
            project["package"] for project in known_projects()
        ]
        out: dict = {"quick": args.quick, "seed": args.seed, "projects": {}}
        with Stack() as stack:
            stack.redis()
            stack.sandbox_workers("python", concurrency=2)
            for pin in pins:
                report, imported = repo_bugs_import(
                    pin=pin, count=args.per_project, seed=args.seed, max_failing=args.max_failing
                )
                environment = environment_request(environment_get(environment_content(pin)["name"]))
                checks = [validate(record, environment) for record in report.records]
                valid = [
                    c
                    for c in checks
                    if c["reference_resolves"]
                    and c["empty_fails_every_fail_to_pass"]
                    and c["empty_passes_every_pass_to_pass"]
                ]
                summary = report.summary()
                summary.update(
                    imported=imported.tasks,
                    validated=len(valid),
                    invalid=[
                        (r.task_id, c)
                        for r, c in zip(report.records, checks, strict=True)
                        if c not in valid
                    ],
                    grading_seconds_per_task=round(
                        sum(c["grading_seconds"] for c in checks) / max(len(checks), 1), 2
                    ),
                    fail_to_pass_per_task=round(
                        sum(len(r.fail_to_pass) for r in report.records) / max(len(checks), 1), 2
                    ),
                )
                out["projects"][pin] = summary
                print(json.dumps({pin: summary}), file=sys.stderr, flush=True)
        projects = out["projects"].values()
        out["tasks"] = sum(p["tasks"] for p in projects)
        out["validated"] = sum(p["validated"] for p in projects)
        out["projects_with_tasks"] = sum(1 for p in projects if p["validated"])
        seconds = sum(p["seconds"] for p in projects)
        out["generation_seconds_per_task"] = (
            round(seconds / out["tasks"], 2) if out["tasks"] else None
        )
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
