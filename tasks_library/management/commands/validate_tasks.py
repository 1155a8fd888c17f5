import json
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack
from core.bounds import bounded
from tasks_library.models import TaskVersion
from tasks_library.selectors import TaskSetNotFound, runtimes_of, task_set_get, task_set_versions
from tasks_library.services import command_line_author, task_set_pin
from tasks_library.validation.pipeline import (
    MUTANTS_MAX,
    REFERENCE_RUNS_MAX,
    Options,
    task_versions_validate,
)
from tasks_library.validation.testgen import task_versions_generate_tests


class Command(BaseCommand):
    help = (
        "Validate task versions in sandboxes: the reference passes every hidden test N times with "
        "the same results (else broken or flaky), a trivial solution fails (else the suite cannot "
        "fail), the prompt's examples agree with the reference (else the prompt contradicts the "
        "tests), and the tests kill the reference's mutants (the mutation score; below the "
        "threshold the suite is weak). One report per version is stored with its evidence; "
        "broken, flaky and contradicting versions are quarantined."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--taskset", help="validate this task set's pinned versions (default: every version)"
        )
        parser.add_argument(
            "--parallelism",
            type=bounded(1, 1024),
            default=None,
            help=(
                "sandbox worker slots to start when no sandbox worker is running (default: the "
                "number of CPUs)"
            ),
        )
        parser.add_argument(
            "--reference-runs",
            type=bounded(1, REFERENCE_RUNS_MAX),
            default=Options.reference_runs,
            help=(
                "times the reference runs; disagreement marks the version flaky (default "
                "%(default)s)"
            ),
        )
        parser.add_argument(
            "--mutants",
            type=bounded(0, MUTANTS_MAX),
            default=Options.mutants,
            help="most mutants per version; 0 skips mutation testing (default %(default)s)",
        )
        parser.add_argument(
            "--weak-threshold",
            type=bounded(0.0, 1.0, float),
            default=Options.weak_threshold,
            help="mutation score under which a suite is weak (default %(default)s)",
        )
        parser.add_argument(
            "--no-examples", action="store_true", help="skip running the prompt's examples"
        )
        parser.add_argument(
            "--generate-tests",
            type=bounded(0, 1000),
            default=0,
            metavar="N",
            help=(
                "EvalPlus-style: up to N generated tests per Python task whose reference passes, "
                "stored as a new version (validated too); with --taskset the set is re-pinned to "
                "the new versions"
            ),
        )
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help='print {"counts": {...}, "task_versions": [...]}',
        )

    def handle(
        self,
        *args,
        taskset,
        parallelism,
        as_json: bool,
        reference_runs,
        mutants,
        weak_threshold,
        no_examples,
        generate_tests,
        **_,
    ):
        if parallelism is not None and parallelism < 1:
            raise CommandError("--parallelism must be at least 1")
        if generate_tests < 0:
            raise CommandError("--generate-tests must be 0 or more")
        options = Options(
            reference_runs=reference_runs,
            mutants=mutants,
            weak_threshold=weak_threshold,
            examples=not no_examples,
        )
        try:
            options.check()
        except ValueError as exc:
            raise CommandError(f"--{str(exc).replace('_', '-')}") from exc
        if taskset:
            try:
                versions = list(task_set_versions(task_set=task_set_get(name=taskset)))
            except TaskSetNotFound as exc:
                raise CommandError(str(exc)) from exc
        else:
            versions = list(
                TaskVersion.objects.select_related("task", "test_suite").order_by(
                    "task__task_id", "number"
                )
            )
        if not versions:
            raise CommandError(
                "no task versions to validate; import some with `python manage.py import_tasks "
                "humaneval`"
            )
        try:
            with Stack() as stack:
                for runtime in runtimes_of(versions):
                    stack.sandbox_workers(runtime, concurrency=parallelism)
                task_versions_validate(versions=versions, options=options)
                generated = (
                    self._generate(versions, generate_tests, options, taskset)
                    if generate_tests
                    else []
                )
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        counts = Counter(v.verdict for v in versions)
        report = {
            "counts": dict(counts),
            "task_versions": [
                {
                    "task_id": v.task.task_id,
                    "version": v.version,
                    "verdict": v.verdict,
                    "reasons": v.verdict_reasons,
                    "quarantined": v.quarantined,
                    "mutation_score": v.mutation_score,
                    "report": v.report,
                }
                for v in versions
            ],
        }
        if generate_tests:
            report["generated"] = [
                {
                    "task_id": g.version.task.task_id,
                    "version": g.version.version,
                    "seeds": g.seeds,
                    "kept": g.kept,
                    "tests_before": g.tests_before,
                    "tests_after": g.tests_after,
                    "note": g.note,
                    "new_version": g.new_version.version if g.new_version else None,
                    "new_verdict": g.new_version.verdict if g.new_version else None,
                    "mutation_score_before": g.version.mutation_score,
                    "mutation_score_after": g.new_version.mutation_score if g.new_version else None,
                }
                for g in generated
            ]
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
            return
        for v in versions:
            if v.verdict != TaskVersion.VERDICT_VALID:
                reasons = "; ".join(
                    " ".join(reason.split()) for reason in v.verdict_reasons
                )  # one line per task
                self.stdout.write(f"{v.task.task_id} {v.version}: {v.verdict}: {reasons}")
        if generate_tests:
            thicker = [g for g in generated if g.new_version]
            self.stdout.write(
                f"generated tests for {len(thicker)} of {len(generated)} versions: "
                f"{sum(g.tests_before for g in generated)} tests before, "
                f"{sum(g.tests_after for g in generated)} after"
            )
        self.stdout.write(
            f"validated {len(versions)} task versions: "
            + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        )

    def _generate(self, versions, count, options, taskset):
        """Generate tests for versions whose reference passes, validate the new versions,
        and re-pin ``taskset`` (when named) with each version replaced by its thicker child."""
        eligible = [
            v
            for v in versions
            if v.verdict in (TaskVersion.VERDICT_VALID, TaskVersion.VERDICT_WEAK_SUITE)
        ]
        generated = task_versions_generate_tests(versions=eligible, count=count)
        fresh = [g.new_version for g in generated if g.new_version]
        if fresh:
            task_versions_validate(versions=fresh, options=options)
        if taskset and fresh:
            replaced = {g.version.pk: g.new_version for g in generated if g.new_version}
            task_set_pin(
                name=taskset,
                versions=[replaced.get(v.pk, v) for v in versions],
                author=command_line_author(),
                change_note=f"generated tests for {len(fresh)} versions",
            )
        return generated
