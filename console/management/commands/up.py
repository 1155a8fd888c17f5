import json
import time

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack
from console.scenario_data import DATA_CONFIG, data_task_set
from console.scenario_terminal import TERMINAL_CONFIG, TERMINAL_TASKS, terminal_task_set
from console.scenarios import AGENT_CONFIG, AGENT_TASKS, HACKING_CONFIG, hacking_task_sets
from core.bounds import STEP_MAX, bounded
from tasks_library.importers import ImportFormatError
from tasks_library.importers.humaneval import default_path, read_humaneval
from tasks_library.selectors import awaiting_validation, task_set_get, task_set_versions
from tasks_library.services import command_line_author, task_set_pin, tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from training.config import ConfigError, RunConfig, config_from_command_line
from training.services import run_create, run_interrupt_if_active
from training.tasks import run_launch
from training.watch import run_summary, run_wait

# The main job validates every task on the way to training, so it runs a lighter pipeline
# than `validate_tasks`' defaults (reference x5, 30 mutants): same stages, fewer runs.
UP_VALIDATION = Options(reference_runs=2, mutants=10)

# The completion scenario trains on the shortest valid HumanEval tasks so that a CPU-only laptop
# sees the reward move within minutes; `train --taskset humaneval` uses all of them.
DEMO_TASK_SET = "humaneval-demo"
COMPLETION_CONFIG = {
    "sft_epochs": 18,
    "sft_batch_size": 4,
    "lr": 1e-4,
    "ppo_epochs": 4,
    "tasks_per_step": 8,
    "train_tasks": 8,
    "group_size": 8,
    "max_turns": 2,
}


def humaneval_validated(records: list[dict], *, say) -> tuple:
    """Import ``records`` as the ``humaneval`` task set and validate the versions no validation
    has judged yet (:func:`tasks_library.selectors.awaiting_validation`): a second ``up`` with
    nothing changed validates nothing. Returns ``(import report, the set's versions)``.

    Raises:
        ImportFormatError: a bad record (nothing written).
    """
    t0 = time.monotonic()
    report = tasks_import(source="humaneval", task_set_name="humaneval", records=records)
    say(
        f"imported {report.tasks} HumanEval tasks ({report.new_versions} new versions) in "
        f"{time.monotonic() - t0:.1f} s"
    )
    t0 = time.monotonic()
    versions = list(task_set_versions(task_set=task_set_get(name="humaneval")))
    waiting = awaiting_validation(versions)
    if waiting:
        task_versions_validate(versions=waiting, options=UP_VALIDATION)
    trainable = sum(v.trainable for v in versions)
    say(
        f"validated {len(waiting)} task versions in sandboxes ({len(versions) - len(waiting)} "
        f"kept their verdicts: `validate_tasks --taskset humaneval` validates them again): "
        f"{trainable} trainable, {sum(v.quarantined for v in versions)} quarantined "
        f"({time.monotonic() - t0:.1f} s)"
    )
    return report, versions


def console_after(base: str, *, headless: bool, started: list[str]) -> str | None:
    """The console's address as the summary may print it: None when this command started the
    console (``web`` in ``started``) and ``--headless`` stops it on exit, since the address would
    be closed by the time anyone reads it."""
    return None if headless and "web" in started else base


class Command(BaseCommand):
    help = (
        "Crucible's main job on the embedded default: migrate, start Redis, a Celery worker and "
        "the console, import the 164 HumanEval tasks, validate them in sandboxes, launch a "
        "training run through Celery (SFT warm start, then GRPO over multi-turn rollouts) and "
        "print the console address. With --headless it exits when the run ends and prints a JSON "
        "summary."
    )

    def add_arguments(self, parser):
        parser.add_argument("--headless", action="store_true", help="exit when the run ends")
        parser.add_argument(
            "--steps",
            type=bounded(1, STEP_MAX),
            default=None,
            help="GRPO steps of the demo run (default 20; 30 for --scenario hacking, 6 for data, "
            "8 for terminal)",
        )
        parser.add_argument(
            "--demo-tasks",
            type=bounded(1, 10_000),
            default=None,
            help="tasks in the demo task set (default 4, the agent scenario; 16 for --scenario "
            "completion, 8 for hacking)",
        )
        parser.add_argument(
            "--port", type=bounded(1, 65_535), default=8000, help="console port (default 8000)"
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            dest="overrides",
            help="override a key of the demo run's config (repeatable), e.g. --set group_size=4",
        )
        parser.add_argument(
            "--scenario",
            choices=("agent", "completion", "hacking", "data", "terminal"),
            default="agent",
            help="agent (the default): the policy as a tool-using agent in sandbox sessions "
            "(view, edit, run the tests, submit), SFT on scripted demonstrations, then GRPO over "
            "multi-turn rollouts; completion: the policy writes each function whole and may "
            "revise it once on the visible tests' result; hacking: train on deliberately "
            "exploitable tasks (hidden tests = the prompt's examples) from a warm start that "
            "learned to hard-code answers, evaluated on honest held-out tasks, to show the "
            "hard-coding flags and the onset alerts in the console; data: import the numpy/pandas "
            "and Python 3.13 task sets, build their environments into the store (once), validate "
            "and train on them; terminal: import the shipped terminal task sets (system "
            "operations, data analysis, office files, tool use), build their Debian roots, "
            "validate them, and train the agent on one task of each family, its reward from the "
            "tasks' verifiers",
        )

    def handle(self, *args, headless, steps, demo_tasks, port, overrides, scenario, **options):
        started = time.monotonic()
        self.scenario = scenario
        if demo_tasks is None:
            demo_tasks = {"hacking": 8, "agent": AGENT_TASKS, "terminal": TERMINAL_TASKS}.get(
                scenario, 16
            )
        if steps is None:
            # the hacking scenario's onset signals compare late steps with a reference window
            steps = {"hacking": 30, "data": 6, "terminal": 8}.get(scenario, 20)
        defaults = {
            "agent": AGENT_CONFIG,
            "completion": COMPLETION_CONFIG,
            "hacking": HACKING_CONFIG,
            "data": DATA_CONFIG,
            "terminal": TERMINAL_CONFIG,
        }[scenario]
        try:
            config = config_from_command_line(defaults=defaults, overrides=overrides, steps=steps)
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", verbosity=0, interactive=False)
        summary = None
        self.launched: list[int] = []
        try:
            with Stack(supervise=True) as stack:
                stack.check_web_port(port)
                stack.worker()
                stack.sandbox_workers()
                if scenario in ("data", "terminal"):  # the Debian root's queue (built once)
                    stack.sandbox_workers("python3.13")
                base = stack.web(port)
                self._say(f"console: {base}/")
                self._say(
                    f"task library: {base}/tasks/ (sign in; make an account with `./crucible "
                    "manage create_user NAME --role curator`)"
                )
                summary = self._main_job(base, config=config, demo_tasks=demo_tasks)
                summary["seconds"] = round(time.monotonic() - started, 1)
                after = console_after(
                    base, headless=headless, started=[name for name, _proc in stack.started]
                )
                summary["console"] = f"{after}{summary['run_page']}" if after else None
                self.stdout.write(json.dumps(summary, indent=2))
                if after is None:
                    self._say(
                        f"the console at {base}/ stops with this command (--headless); run "
                        "`./crucible up` without --headless to keep it, with the run's pages at "
                        f"{summary['run_page']}"
                    )
                if not headless:
                    self._say(
                        f"run finished; the console stays up at {base}/ — press Ctrl-C to stop"
                    )
                    while True:
                        time.sleep(3600)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        except (KeyboardInterrupt, SystemExit):
            self._say("stopping")
            interrupted = [
                run_id
                for run_id in self.launched
                if run_interrupt_if_active(
                    run_id=run_id, reason="`up` was stopped before the run finished"
                )
            ]
            if interrupted:
                raise CommandError(
                    f"stopped; run {', '.join(map(str, interrupted))} interrupted"
                ) from None
        if summary and summary["run"]["status"] != "succeeded":
            raise CommandError(f"run {summary['run']['run_id']} ended {summary['run']['status']}")

    def _main_job(self, base: str, *, config: RunConfig, demo_tasks: int) -> dict:
        if self.scenario in ("data", "terminal"):
            try:
                if self.scenario == "data":
                    task_set, summary = data_task_set(options=UP_VALIDATION, say=self._say)
                else:
                    task_set, summary = terminal_task_set(
                        options=UP_VALIDATION, say=self._say, tasks=demo_tasks
                    )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            return self._train(base, task_set=task_set, config=config, summary=summary)
        try:
            report, versions = humaneval_validated(read_humaneval(default_path()), say=self._say)
        except ImportFormatError as exc:
            raise CommandError(f"import failed, nothing was written: {exc}") from exc
        valid = [v for v in versions if v.trainable]

        demo = sorted(
            valid, key=lambda v: (len(v.prompt) + len(v.reference_solution), v.task.task_id)
        )[:demo_tasks]
        if self.scenario == "hacking":
            task_set, config = hacking_task_sets(
                valid, config=config, tasks=demo_tasks, say=self._say
            )
        else:
            task_set = task_set_pin(
                name=DEMO_TASK_SET, versions=demo, description="shortest trainable HumanEval tasks"
            )
        summary = {
            "imported": report.tasks,
            "trainable": len(valid),
            "quarantined": sum(v.quarantined for v in versions),
            "verdicts": {
                v: sum(1 for x in versions if x.verdict == v)
                for v in sorted({x.verdict for x in versions})
            },
        }
        return self._train(base, task_set=task_set, config=config, summary=summary)

    def _train(self, base: str, *, task_set, config: RunConfig, summary: dict) -> dict:
        """Launch the demo run on ``task_set`` through Celery, wait for it, and return
        ``summary`` with the run's."""
        descriptions = {
            "completion": "the main job's completion scenario: SFT warm start, then GRPO on the "
            "shortest trainable HumanEval tasks",
            "hacking": "the main job's hacking scenario: exploitable tasks, honest held-out set",
            "data": "the main job's data scenario: numpy/pandas and Python 3.13 tasks, each "
            "graded in its environment version",
            "agent": "the main job's agent scenario: tool calls in sandbox sessions, SFT on "
            "scripted demonstrations, then GRPO over multi-turn rollouts",
            "terminal": "the main job's terminal scenario: an agent on Debian machines "
            "(system operations, data analysis, office files, tool use), rewarded by each "
            "task's verifier on the final state",
        }
        try:
            run = run_create(
                task_set=task_set,
                config=config,
                name=f"up: {self.scenario} demo",
                description=descriptions[self.scenario],
                tags=["demo", self.scenario],
                launched_by=command_line_author(),
            )
        except ValueError as exc:  # no valid task to train on
            raise CommandError(str(exc)) from exc
        self.launched.append(run.pk)
        run_launch.delay(run.pk)
        self._say(f"launched run {run.pk} through Celery; watch it live at {base}/runs/{run.pk}/")
        run = run_wait(
            run.pk,
            on_step=lambda s: self._say(f"  step {s.step}: reward/mean={s.reward_mean:.3f}"),
            on_progress=lambda line: self._say(f"  {line}"),  # the end's status line too
        )
        return {
            **summary,
            "scenario": self.scenario,
            "rollout_mode": config.rollout_mode,
            "run_page": f"/runs/{run.pk}/",
            "run": run_summary(run),
            "alerts": [
                {"step": a.step, "stream": a.stream, "detector": a.detector, "severity": a.severity}
                for a in run.alerts.order_by("step", "id")
            ],
            "flagged_trajectories": run.trajectories.exclude(flag_evidence={}).count(),
        }

    def _say(self, text: str) -> None:
        self.stderr.write(text)
