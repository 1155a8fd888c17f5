"""Repository grading: what Crucible's first line costs, against the same suites run bare.

For each project of ``tasks_library/data/repo_bugs_projects.json`` (``--quick``: inflection), its
pristine sdist is the workspace and its whole suite runs in a fresh sandbox session each time,
on one session worker, in the project's environment (python3.11, pytest 8.3.4 and its pinned
test packages), three ways:

  * ``crucible``: ``sandboxes.repository.run_suite_report``, the grading runner every repository
    grading, generation and validation runs: the supervisor, the enclave, the audit hook, the
    machinery check after every test, the junit cross-check;
  * ``bare``: ``python3 -m pytest -rA -p no:cacheprovider`` with the task's options, and its
    summary lines (``PASSED id``, ``FAILED id - ...``) read into a status per id: how SWE-bench's
    harness runs a suite and reads its log (in a container there; in the same kind of session
    here, so that only the runner differs);
  * ``unguarded`` (ablation): the same runner with its guards off (``run_pytest(guards=False)``):
    the reporter and the junit tally without the first line's defences.

Each round runs every side ``--gradings`` times, in an order that rotates between rounds
(``benchmarks.common.rotating``); a side's figure is the spread of its per-round medians, in
milliseconds, from the call to the answer. ``ids`` says how many test ids each side read and
whether they agree (skipped tests aside: pytest's ``-rA`` summary does not name them). Ratios:
``bare`` over ``crucible`` and ``unguarded`` over ``crucible`` (above 1: Crucible is faster;
below: what its defences cost).

    .venv/bin/python benchmarks/repo_grading.py [--quick] [--rounds 3] [--gradings 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import common

# pytest's -rA summary: "PASSED tests/x.py::test_a", "FAILED tests/x.py::test_b - AssertionError"
# (an id may hold spaces: "test_x[a b]"; a failure's message follows " - ")
SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (.+?)(?: - .*)?$", re.MULTILINE)
SIDES = ("crucible", "bare", "unguarded")


def bare_statuses(output: str) -> dict[str, str]:
    """Node id -> status from pytest's ``-rA`` summary (SWE-bench's log parsing)."""
    return {node: word.lower() for word, node in SUMMARY.findall(output)}


def sides(pin: str, slot: str, sdists: Path) -> dict:
    """Each side's grading of the project ``pin``: a callable that runs its whole suite once in
    a fresh session of ``slot`` and returns what it read: test id -> status."""
    from sandboxes.environments.build import materialise  # noqa: PLC0415 (after django.setup)
    from sandboxes.environments.spec import parse  # noqa: PLC0415
    from sandboxes.repository.grading import pytest_options, run_suite_report  # noqa: PLC0415
    from sandboxes.repository.report import statuses_of  # noqa: PLC0415
    from sandboxes.repository.runner import graded_tree, run_pytest  # noqa: PLC0415
    from sandboxes.sessions import Workspace, open_session  # noqa: PLC0415
    from tasks_library.generators.repo_bugs import (  # noqa: PLC0415
        environment_content,
        test_command,
    )
    from tasks_library.generators.sdists import fetch, read_project  # noqa: PLC0415

    project = read_project(fetch(pin, cache_dir=sdists))
    spec = environment_content(pin)
    request = materialise(parse(spec["runtime"], spec["packages"])).request_field()
    command = test_command(project)
    files = dict(project.files)

    def crucible() -> dict[str, str]:
        report = run_suite_report(files, test_command=command, environment=request, slot=slot)
        return report.statuses

    def bare() -> dict[str, str]:
        argv = f"python3 -m {command} -rA -p no:cacheprovider"
        with open_session(Workspace.from_files(files), environment=request, slot=slot) as session:
            done = session.exec(argv, timeout_s=300)
        return bare_statuses(done.stdout)

    def unguarded() -> dict[str, str]:
        _execution, answer = run_pytest(
            graded_tree(files, files, {}, files),
            files,
            trusted=sorted(files),
            args=pytest_options(command),
            ids=None,
            environment=request,
            timeout_s=300,
            runtime="python",
            slot=slot,
            guards=False,
        )
        return statuses_of(answer or {})

    return {"crucible": crucible, "bare": bare, "unguarded": unguarded}


def measure(runs: dict, rounds: int, gradings: int) -> dict:
    """One project's figures: ids read (after a warm-up grading per side), milliseconds per
    grading per side, and the ratios."""
    # The warm-up; what each side read. pytest's -rA summary names no skipped test (its line is
    # "SKIPPED [1] file:line: reason"), so the sides agree on the ids of the others.
    read = {side: run() for side, run in runs.items()}
    counted = {
        side: {i for i, s in found.items() if s != "skipped"} for side, found in read.items()
    }
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for round_index in range(rounds):
        per_round: dict[str, list[float]] = {side: [] for side in SIDES}
        for side in common.rotating(round_index, SIDES):
            for _ in range(gradings):
                started = time.perf_counter()
                runs[side]()
                per_round[side].append((time.perf_counter() - started) * 1000)
        for side in SIDES:
            times[side].append(statistics.median(per_round[side]))
    figures = {side: common.spread(times[side], 1) for side in SIDES}
    crucible_ms = figures["crucible"]["median"]
    return {
        "tests": len(read["crucible"]),
        "ids": {
            **{side: len(ids) for side, ids in counted.items()},
            "skipped": len(read["crucible"]) - len(counted["crucible"]),
            "agree": counted["crucible"] == counted["bare"] == counted["unguarded"],
        },
        **{f"{side}_ms": figures[side] for side in SIDES},
        "ratio_bare_over_crucible": round(figures["bare"]["median"] / crucible_ms, 3),
        "ratio_unguarded_over_crucible": round(figures["unguarded"]["median"] / crucible_ms, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", default="", help="comma-separated NAME==VERSION (all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gradings", type=int, default=3, help="per side and round")
    args = common.parse_args(parser, {"projects": "inflection==0.5.1", "rounds": 2, "gradings": 1})
    os.environ.setdefault("CRUCIBLE_ENVIRONMENT_STORE", "/var/cache/crucible/environments")
    with common.private_var_dir(migrate=False) as var_dir:
        from console.management.stack import Stack  # noqa: PLC0415 (after django.setup)

        pins = common.project_pins(args.projects)
        out: dict = {
            "quick": args.quick,
            "rounds": args.rounds,
            "gradings": args.gradings,
            "peers": {
                "bare": "python3 -m pytest -rA -p no:cacheprovider, summary lines parsed "
                "(SWE-bench's harness reading of a run), same session kind and environment",
                "unguarded": "Crucible's runner with guards=False (ablation)",
            },
            "projects": {},
        }
        with Stack() as stack:
            worker, slots = common.own_session_worker(stack, "python", slots=1)
            try:
                for pin in pins:
                    runs = sides(pin, slots[0], var_dir / "sdists")
                    out["projects"][pin] = measure(runs, args.rounds, args.gradings)
                    print(json.dumps({pin: out["projects"][pin]}), file=sys.stderr, flush=True)
            finally:
                worker.terminate()
                worker.wait(timeout=30)
        projects = list(out["projects"].values())
        out["tests"] = sum(p["tests"] for p in projects)
        out["ids_agree"] = all(p["ids"]["agree"] for p in projects)
        for side in SIDES:  # the projects' medians, summed: one grading of every suite
            out[f"{side}_ms_all_projects"] = round(
                sum(p[f"{side}_ms"]["median"] for p in projects), 1
            )
        for key in ("ratio_bare_over_crucible", "ratio_unguarded_over_crucible"):
            out[key] = round(statistics.median(p[key] for p in projects), 3)
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
