import json
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from console.stack import ServiceError, Stack
from tasks_library.models import TaskVersion
from tasks_library.selectors import TaskSetNotFound, runtimes_of, task_set_get, task_set_versions
from tasks_library.validation.pipeline import Options, task_versions_validate


class Command(BaseCommand):
    help = (
        "Validate task versions in sandboxes: the reference passes every hidden test N times with the same "
        "results (else broken or flaky), a trivial solution fails (else the suite cannot fail), the prompt's "
        "examples agree with the reference (else the prompt contradicts the tests), and the tests kill the "
        "reference's mutants (the mutation score; below the threshold the suite is weak). One report per "
        "version is stored with its evidence; broken, flaky and contradicting versions are quarantined."
    )

    def add_arguments(self, parser):
        parser.add_argument("--taskset", help="validate this task set's pinned versions (default: every version)")
        parser.add_argument("--parallelism", type=int, default=None,
                            help="sandbox worker slots to start when no sandbox worker is running (default: the number of CPUs)")
        parser.add_argument("--reference-runs", type=int, default=Options.reference_runs,
                            help="times the reference runs; disagreement marks the version flaky (default %(default)s)")
        parser.add_argument("--mutants", type=int, default=Options.mutants,
                            help="most mutants per version; 0 skips mutation testing (default %(default)s)")
        parser.add_argument("--weak-threshold", type=float, default=Options.weak_threshold,
                            help="mutation score under which a suite is weak (default %(default)s)")
        parser.add_argument("--no-examples", action="store_true", help="skip running the prompt's examples")
        parser.add_argument("--json", action="store_true", dest="as_json", help='print {"counts": {...}, "task_versions": [...]}')

    def handle(self, *args, taskset, parallelism, as_json: bool, reference_runs, mutants, weak_threshold, no_examples, **_):
        if parallelism is not None and parallelism < 1:
            raise CommandError("--parallelism must be at least 1")
        options = Options(reference_runs=reference_runs, mutants=mutants, weak_threshold=weak_threshold, examples=not no_examples)
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
            versions = list(TaskVersion.objects.select_related("task", "test_suite").order_by("task__task_id", "number"))
        if not versions:
            raise CommandError("no task versions to validate; import some with `python manage.py import_tasks humaneval`")
        try:
            with Stack() as stack:
                for runtime in runtimes_of(versions):
                    stack.sandbox_workers(runtime, concurrency=parallelism)
                task_versions_validate(versions=versions, options=options)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        counts = Counter(v.verdict for v in versions)
        report = {
            "counts": dict(counts),
            "task_versions": [
                {"task_id": v.task.task_id, "version": v.version, "verdict": v.verdict, "reasons": v.verdict_reasons,
                 "quarantined": v.quarantined, "mutation_score": v.mutation_score, "report": v.report}
                for v in versions
            ],
        }
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
            return
        for v in versions:
            if v.verdict != TaskVersion.VERDICT_VALID:
                reasons = "; ".join(" ".join(reason.split()) for reason in v.verdict_reasons)  # one line per task
                self.stdout.write(f"{v.task.task_id} {v.version}: {v.verdict}: {reasons}")
        self.stdout.write(f"validated {len(versions)} task versions: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))

