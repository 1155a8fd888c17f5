"""Generated repository tasks from real projects: how many, how valid, how long per task.

For each project of ``tasks_library/data/repo_bugs_projects.json`` (``--quick``: 1 task from
inflection, up to 40 failing tests allowed so that few candidates run, 1 reference run; the JSON's
``max_failing`` says which filter a figure was measured with), generates
``--per-project`` tasks on ``import_tasks repo-bugs``'s path (the sdist fetched with pip, the
suite run in a sandbox, bugs kept when 1 to ``--max-failing`` tests fail), imports them as
repository task versions and validates them with the pipeline: the reference patch graded
``--reference-runs`` times by ``sandboxes.repository.grade_repository`` in a fresh sandbox each,
with identical per-id results; the empty patch failing every FAIL_TO_PASS id and passing every
PASS_TO_PASS id; every id collected. Prints JSON: per project, tasks made, bugs tried and why
the others were dropped, verdicts, and seconds per task (generation, validation), and the
seconds of each project's environment (built, or found in the store: the first run on a machine
builds it) and of the import.

    .venv/bin/python benchmarks/repo_bugs.py [--quick] [--per-project 14] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import parse_args, private_var_dir, project_pins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-project", type=int, default=14, help="tasks asked per project")
    parser.add_argument(
        "--projects", default="", help="comma-separated NAME==VERSION (default: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-failing", type=int, default=10)
    parser.add_argument("--reference-runs", type=int, default=3)
    parser.add_argument("--var-dir", default="", help="keep the database here (default: temporary)")
    # The quick mode (CI's) loosens the filter so that the first candidate is kept (about 2
    # minutes less here); the JSON names the filter it ran with, and full-size figures are
    # measured with the default.
    quick = {
        "per_project": 1,
        "projects": "inflection==0.5.1",
        "max_failing": 40,
        "reference_runs": 1,
    }
    args = parse_args(parser, quick)
    os.environ.setdefault("CRUCIBLE_ENVIRONMENT_STORE", "/var/cache/crucible/environments")
    with private_var_dir(args.var_dir):
        from console.management.stack import Stack  # noqa: PLC0415 (after django.setup)
        from tasks_library.generators.repo_bugs import repo_bugs_import  # noqa: PLC0415

        pins = project_pins(args.projects)
        out: dict = {
            "quick": args.quick,
            "seed": args.seed,
            "max_failing": args.max_failing,
            "reference_runs": args.reference_runs,
            "projects": {},
        }
        with Stack() as stack:
            stack.redis()
            stack.sandbox_workers("python", concurrency=2)
            for pin in pins:
                done = repo_bugs_import(
                    pin=pin,
                    count=args.per_project,
                    seed=args.seed,
                    max_failing=args.max_failing,
                    reference_runs=args.reference_runs,
                )
                summary = done.summary()
                summary["fail_to_pass_per_task"] = round(
                    sum(len(r.fail_to_pass) for r in done.report.records) / summary["tasks"], 2
                )
                summary["not_valid"] = {
                    v.task.task_id: [v.verdict, v.verdict_reasons]
                    for v in done.versions
                    if v.verdict != "valid"
                }
                out["projects"][pin] = summary
                print(json.dumps({pin: summary}), file=sys.stderr, flush=True)
        projects = out["projects"].values()
        out["tasks"] = sum(p["tasks"] for p in projects)
        out["valid"] = sum(p["valid"] for p in projects)
        out["projects_with_valid_tasks"] = sum(1 for p in projects if p["valid"])
        seconds = sum(p["seconds"] for p in projects)
        out["generation_seconds_per_task"] = (
            round(seconds / out["tasks"], 2) if out["tasks"] else None
        )
        out["environment_seconds"] = round(sum(p["environment_seconds"] for p in projects), 3)
        out["import_seconds"] = round(sum(p["import_seconds"] for p in projects), 3)
        validation = sum(p["validation_seconds"] for p in projects)
        out["validation_seconds_per_task"] = (
            round(validation / out["tasks"], 2) if out["tasks"] else None
        )
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
