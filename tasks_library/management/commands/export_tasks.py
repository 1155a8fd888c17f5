import gzip
import json
import os
import re
import secrets
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from tasks_library.importers.crucible import FORMAT, export_record
from tasks_library.importers.swe_bench_export import SweBenchExportError, swe_bench_rows
from tasks_library.selectors import (
    TaskSetNotFound,
    latest_versions,
    task_set_get,
    task_set_versions,
)
from tasks_library.terminal.layout import TerminalTaskError, write_harbor
from tasks_library.terminal.library import terminal_task_of


class Command(BaseCommand):
    help = (
        f"Write task versions in Crucible's task format ({FORMAT}, JSONL, one version a line, "
        "with its environment, test suite and files) to a file or stdout. `import_tasks --format "
        "crucible FILE` reads it back with identical content hashes. --format swe-bench --git-repo "
        "DIR writes the repository tasks as SWE-bench-shaped rows instead; --format harbor "
        "--output DIR writes the terminal tasks as Harbor task directories (the same bytes they "
        "were imported from: `import_tasks terminal DIR` reads them back)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--taskset",
            help=(
                "export this task set's pinned versions, in order (default: the latest version of "
                "every task)"
            ),
        )
        parser.add_argument(
            "--output", "-o", type=Path, help="write here (.gz compresses); default stdout"
        )
        parser.add_argument(
            "--format",
            choices=["crucible", "swe-bench", "harbor"],
            default="crucible",
            help=(
                "crucible (default): every task version; swe-bench: the repository tasks as "
                "SWE-bench-shaped rows, their trees committed into --git-repo (read back with "
                "`import_tasks swe-bench FILE --repo DIR`); harbor: the terminal tasks as task "
                "directories under --output DIR (one per task, named after the task)"
            ),
        )
        parser.add_argument(
            "--git-repo",
            type=Path,
            metavar="DIR",
            help="with --format swe-bench: the git repository the rows' base commits are in "
            "(created when absent; one root commit per distinct workspace)",
        )

    def handle(self, *args, taskset, output, format, git_repo, **options):
        if (format == "swe-bench") != (git_repo is not None):
            raise CommandError("--git-repo DIR goes with --format swe-bench, and only with it")
        if taskset:
            try:
                versions = task_set_versions(task_set=task_set_get(name=taskset))
            except TaskSetNotFound as exc:
                raise CommandError(str(exc)) from exc
        else:
            versions = (
                latest_versions()
                .select_related("task", "test_suite", "environment")
                .order_by("task__task_id", "number")
            )
        if format == "harbor":
            self._harbor(versions, output)
            return
        if format == "swe-bench":
            try:
                rows = swe_bench_rows(versions.iterator(), git_repo)
            except (SweBenchExportError, OSError) as exc:
                raise CommandError(f"cannot write the git repository {git_repo}: {exc}") from exc
        else:
            rows = (export_record(v) for v in versions.iterator())
        lines = (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
        count = 0
        if output is None:
            try:
                for line in lines:
                    self.stdout.write(line, ending="")
                    count += 1
            except UnicodeError as exc:
                raise CommandError(f"cannot write task version {count + 1}: {exc}") from exc
        else:
            # Written beside the target and renamed over it once complete: a failure (a full
            # disk, an interrupt) leaves the old file or none, never half an export.
            opener = gzip.open if output.suffix == ".gz" else open
            partial = output.with_name(f".{output.name}.{secrets.token_hex(4)}.partial")
            try:
                with opener(partial, "wt", encoding="utf-8") as handle:
                    for line in lines:
                        handle.write(line)
                        count += 1
                os.replace(partial, output)
            except (OSError, UnicodeError) as exc:
                raise CommandError(f"cannot write {output}: {exc}; nothing was written") from exc
            finally:
                partial.unlink(missing_ok=True)
            self.stderr.write(f"exported {count} task versions to {output}")

    def _harbor(self, versions, output) -> None:
        """Each terminal version's task directory under ``output`` (a directory, created; one
        that exists must be empty)."""
        if output is None:
            raise CommandError("--format harbor writes directories: name one with --output DIR")
        terminal = [v for v in versions.iterator() if v.is_terminal]
        if not terminal:
            raise CommandError("no terminal task to export (the others have --format crucible)")
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            raise CommandError(f"{output} exists and is not an empty directory; nothing written")
        written = []
        try:
            for version in terminal:
                task = terminal_task_of(version)
                # a directory name of safe characters only, never "." or ".."
                name = re.sub(r"[^A-Za-z0-9._-]", "_", task.name.replace("/", "__")).strip(".")
                written.append(write_harbor(task, output / (name or f"task-{version.pk}")))
        except (OSError, TerminalTaskError) as exc:
            raise CommandError(f"cannot write {output}: {exc}") from exc
        self.stderr.write(f"exported {len(written)} terminal tasks to {output}")
