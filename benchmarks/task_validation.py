"""Task validation at the scale of HumanEval, and the curation list at 100,000 task versions.

Part 1, in a fresh SQLite database and with one ``sandbox_worker --concurrency 2``
(Python; 2 cores): import the 164 HumanEval tasks, then the whole pipeline with
``validate_tasks``' defaults - reference x5, trivial, prompt examples, 30 mutants - and
EvalPlus-style test generation (20 candidate inputs per task, reference x2 as the
oracle) with the new versions validated again. Seconds and executions per stage,
verdict counts, tests per task and mutation score before and after generation.

Part 2: 100,000 task versions (bulk-inserted) behind the task list API and page: p95
latency over 20 requests and SQL queries per request, at page sizes 10, 50 and 100 and
with a filter and a search; the query count must not grow with the page size.

No peer is named for this issue; the figures stand alone. Prints JSON.
Run: ``.venv/bin/python benchmarks/task_validation.py [--skip-pipeline] [--tasks N]
[--versions N]``; ``--quick`` (what CI runs): the pipeline on the first 2 HumanEval tasks, the
list at 5,000 versions with 3 requests per case.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from console.management.stack import Stack
from tasks_library.importers.humaneval import default_path, read_humaneval

# Django's models load once common.private_var_dir has set Django up on the benchmark's own var
# dir (in main): the imports of what uses them stand in the functions.


def _mean(values, places: int = 4) -> float | None:
    """The mean of ``values``; None when there are none (a few tasks, as in --quick)."""
    values = list(values)
    return round(statistics.fmean(values), places) if values else None


def pipeline(tasks: int) -> dict:

    from tasks_library.selectors import (  # noqa: PLC0415 (models: after django.setup)
        task_set_get,
        task_set_versions,
    )
    from tasks_library.services import tasks_import  # noqa: PLC0415 (models: after django.setup)
    from tasks_library.validation.pipeline import (  # noqa: PLC0415 (models: after django.setup)
        Options,
        task_versions_validate,
    )
    from tasks_library.validation.testgen import (  # noqa: PLC0415 (models: after django.setup)
        task_versions_generate_tests,
    )

    out: dict = {}
    with Stack() as stack:
        stack.redis()
        stack.sandbox_workers("python", concurrency=2)
        started = time.monotonic()
        tasks_import(
            source="humaneval",
            task_set_name="humaneval",
            records=itertools.islice(read_humaneval(default_path()), tasks),
        )
        out["import_s"] = round(time.monotonic() - started, 2)
        versions = list(task_set_versions(task_set=task_set_get(name="humaneval")))
        stages: dict = {}
        started = time.monotonic()
        task_versions_validate(versions=versions, options=Options(), timings=stages)
        out["validation_s"] = round(time.monotonic() - started, 2)
        out["stages"] = stages
        out["verdicts"] = dict(Counter(v.verdict for v in versions))
        out["flagged"] = {
            v.task.task_id: {"verdict": v.verdict, "reasons": v.verdict_reasons}
            for v in versions
            if v.verdict not in ("valid",)
        }
        scores = [v.mutation_score for v in versions if v.mutation_score is not None]
        out["mutation_score_mean"] = _mean(scores)

        eligible = [v for v in versions if v.verdict in ("valid", "weak_suite")]
        started = time.monotonic()
        generated = task_versions_generate_tests(versions=eligible, count=20)
        generation_s = time.monotonic() - started
        fresh = [g.new_version for g in generated if g.new_version]
        regen: dict = {}
        started = time.monotonic()
        task_versions_validate(versions=fresh, options=Options(), timings=regen)
        out["test_generation"] = {
            "generate_s": round(generation_s, 2),
            "revalidate_s": round(time.monotonic() - started, 2),
            "revalidate_stages": regen,
            "versions_with_new_tests": len(fresh),
            "tests_before": sum(g.tests_before for g in generated),
            "tests_after": sum(g.tests_after for g in generated),
            "tests_per_task_before": _mean((g.tests_before for g in generated), 2),
            "tests_per_task_after": _mean((g.tests_after for g in generated), 2),
            "mutation_score_mean_before": _mean(
                g.version.mutation_score for g in generated if g.new_version
            ),
            "mutation_score_mean_after": _mean(
                v.mutation_score for v in fresh if v.mutation_score is not None
            ),
            "new_verdicts": dict(Counter(v.verdict for v in fresh)),
            "no_new_tests": {
                g.version.task.task_id: g.note for g in generated if not g.new_version
            },
        }
        out["total_s"] = round(
            out["import_s"]
            + out["validation_s"]
            + generation_s
            + out["test_generation"]["revalidate_s"],
            2,
        )
    return out


def _fill(count: int) -> None:
    """Bulk-insert ``count`` task versions (tasks with 1-3 versions) sharing one suite."""
    from tasks_library.models import Task, TaskVersion  # noqa: PLC0415 (models: after django.setup)
    from tasks_library.services import (  # noqa: PLC0415 (models: after django.setup)
        environment_default_python,
        test_suite_get_or_create,
    )

    suite = test_suite_get_or_create(
        harness_name="python-check",
        hidden_tests="def check(candidate):\n    assert candidate(1) == 2\n",
    )
    env = environment_default_python()
    rng = random.Random(0)
    verdicts = ["valid"] * 6 + ["weak_suite", "flaky", "broken_reference", "prompt_contradicts"]
    made = 0
    batch = 0
    while made < count:
        tasks = Task.objects.bulk_create(
            Task(
                task_id=f"synthetic/{batch}/{k}",
                source=rng.choice(["humaneval", "mbpp", "internal"]),
                tags=[rng.choice(["strings", "math", "lists"])],
            )
            for k in range(2000)
        )
        rows = []
        for task in tasks:
            for number in range(1, rng.randint(1, 3) + 1):
                verdict = rng.choice(verdicts)
                rows.append(
                    TaskVersion(
                        task=task,
                        content_hash=f"{task.pk:032x}{number:032x}",
                        number=number,
                        prompt=f'def f(x):\n    """Task {task.task_id}, version {number}."""\n',
                        entry_point="f",
                        reference_solution="    return x + 1\n",
                        environment=env,
                        test_suite=suite,
                        verdict=verdict,
                        quarantined=verdict in ("flaky", "broken_reference", "prompt_contradicts"),
                        attempts_passed=rng.randint(0, 5),
                        attempts_total=5,
                        mutation_score=rng.random(),
                    )
                )
        rows = rows[: count - made]
        TaskVersion.objects.bulk_create(rows, batch_size=1000)
        made += len(rows)
        batch += 1


def listing(count: int, repeats: int) -> dict:
    from django.contrib.auth.models import User  # noqa: PLC0415 (models: after django.setup)

    from tasks_library.models import TaskVersion  # noqa: PLC0415 (models: after django.setup)

    started = time.monotonic()
    _fill(count - TaskVersion.objects.count())
    fill_s = time.monotonic() - started
    user, _ = User.objects.get_or_create(username="bench-viewer")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    results = {
        "task_versions": TaskVersion.objects.count(),
        "fill_s": round(fill_s, 1),
        "requests": [],
    }
    cases = [
        ("api", "/api/task-versions/?page_size={n}"),
        ("page", "/tasks/?page_size={n}"),
        ("api", "/api/task-versions/?page_size={n}&verdict=flaky&page=3"),
        ("api", "/api/task-versions/?page_size={n}&search=synthetic/7/1"),
        ("page", "/tasks/?page_size={n}&status=quarantined&difficulty=medium"),
    ]
    for kind, template in cases:
        for size in (10, 50, 100):
            url = template.format(n=size)
            times, queries = [], set()
            for _ in range(repeats):
                with CaptureQueriesContext(connection) as captured:
                    began = time.perf_counter()
                    response = client.get(url)
                    times.append((time.perf_counter() - began) * 1000)
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code}")
                queries.add(len(captured))
            times.sort()
            results["requests"].append(
                {
                    "kind": kind,
                    "url": url,
                    "page_size": size,
                    "p50_ms": round(times[len(times) // 2], 1),
                    "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1),
                    "queries": sorted(queries),
                }
            )
    by_case: dict = {}
    for row in results["requests"]:
        by_case.setdefault(
            row["url"].split("page_size=")[0]
            + row["url"].split("page_size=")[1][len(str(row["page_size"])) :],
            set(),
        ).update(row["queries"])
    results["query_count_constant_in_page_size"] = all(len(q) == 1 for q in by_case.values())
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--skip-pipeline", action="store_true", help="only part 2 (the list at scale)"
    )
    parser.add_argument(
        "--tasks", type=int, default=164, help="HumanEval tasks through the pipeline (part 1)"
    )
    parser.add_argument(
        "--versions", type=int, default=100_000, help="task versions for part 2 (default 100000)"
    )
    parser.add_argument("--requests", type=int, default=20, help="requests per case (part 2)")
    args = common.parse_args(parser, {"tasks": 2, "versions": 5000, "requests": 3})
    with common.private_var_dir(keep_redis_url=False):
        report = {"quick": args.quick, "machine": {"cpus": os.cpu_count()}}
        if not args.skip_pipeline:
            report["pipeline"] = pipeline(args.tasks)
            print(
                json.dumps({"pipeline": report["pipeline"]}), file=sys.stderr, flush=True
            )  # kept if part 2 fails
        report["listing"] = listing(args.versions, args.requests)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
