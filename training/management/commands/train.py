import json

from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack
from core.bounds import STEP_MAX, bounded
from tasks_library.selectors import TaskSetNotFound, runtimes_of, task_set_get, task_set_versions
from tasks_library.services import command_line_author
from training.config import ConfigError, config_from_command_line
from training.kubernetes import KubernetesSpec
from training.services import run_create, run_interrupt_if_active
from training.tasks import run_launch
from training.watch import run_summary, run_wait


class Command(BaseCommand):
    help = (
        "Launch a training run (SFT warm start, then GRPO over multi-turn sandbox rollouts) on a "
        "task set through Celery. Starts the embedded Redis and a Celery worker for its own "
        "duration when none runs. With --headless it waits for the run and prints a summary with "
        "the mean reward of every step."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--taskset", required=True, help="task set to train on (its valid versions)"
        )
        parser.add_argument(
            "--steps", type=bounded(1, STEP_MAX), required=True, help="number of GRPO steps"
        )
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            dest="overrides",
            help="override a config key (repeatable), e.g. --set lr=1e-4 --set group_size=4",
        )
        parser.add_argument(
            "--backend",
            choices=["local", "kubernetes"],
            default="local",
            help="where the trainer runs: a process on this host (local), or a Kubernetes Job "
            "whose spec is the config key kubernetes, e.g. "
            '--set \'kubernetes={"image": "reg/crucible:1"}\'',
        )
        parser.add_argument("--name", default="", help="the run's name in the runs table")
        parser.add_argument("--description", default="", help="what the run tries")
        parser.add_argument(
            "--tag",
            action="append",
            default=[],
            dest="tags",
            help="a tag of the run (repeatable), e.g. --tag sweep --tag lr-1e-4",
        )
        parser.add_argument(
            "--headless", action="store_true", help="wait for the run to end, print a summary"
        )
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help='with --headless: print {"run_id", "status", "steps": [{"step", "reward_mean"}]}',
        )

    def handle(
        self,
        *args,
        taskset,
        steps,
        overrides,
        headless,
        as_json,
        backend="local",
        name="",
        description="",
        tags=(),
        **options,
    ):
        try:
            task_set = task_set_get(name=taskset)
            config = config_from_command_line(defaults={}, overrides=overrides, steps=steps)
            if backend == "kubernetes":
                KubernetesSpec.from_config(config.kubernetes)  # the image is required there
            run = run_create(
                task_set=task_set,
                config=config,
                backend=backend,
                name=name,
                description=description,
                tags=list(tags),
                launched_by=command_line_author(),
            )
        except (TaskSetNotFound, ConfigError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        try:
            with Stack(supervise=True) as stack:
                stack.worker()
                for runtime in runtimes_of(task_set_versions(task_set=task_set)):
                    stack.sandbox_workers(runtime, concurrency=config.sandbox_parallelism)
                run_launch.delay(run.pk)
                if not as_json:
                    self.stdout.write(
                        f"launched run {run.pk} on task set {taskset!r} ({steps} steps)"
                    )
                if not headless and not stack.started:
                    # A running worker owns the run; follow it in the console.
                    if as_json:
                        self.stdout.write(json.dumps({"run_id": run.pk, "status": run.status}))
                    return
                # stdout stays the summary (or the step lines); what the run is doing before its
                # first step (launch, the SFT warm start's epochs) goes to stderr as it happens
                run = run_wait(
                    run.pk,
                    on_step=self._say_step if as_json else self._print_step,
                    on_progress=self.stderr.write,
                )
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        except (KeyboardInterrupt, SystemExit) as exc:
            if backend != "local":  # the Job goes on in the cluster
                raise CommandError(
                    f"stopped watching; run {run.pk} goes on in Kubernetes "
                    f"(stop it with `python manage.py cancel_run {run.pk}`)"
                ) from exc
            # The worker this command started is stopped, and its trainer with it.
            run_interrupt_if_active(
                run_id=run.pk, reason="the `train` command that owned its worker was stopped"
            )
            raise CommandError(f"stopped; run {run.pk} is interrupted") from exc
        if as_json:
            self.stdout.write(json.dumps(run_summary(run), indent=2))
        else:
            self.stdout.write(f"run {run.pk} {run.status}: {run.status_reason}")
        if run.status != run.SUCCEEDED:
            raise CommandError(f"run {run.pk} ended {run.status}: {run.status_reason}")

    def _say_step(self, step) -> None:
        self.stderr.write(f"  step {step.step}: reward/mean={step.reward_mean:.3f}")

    def _print_step(self, step) -> None:
        m = step.metrics
        self.stdout.write(
            f"step {step.step}: reward/mean={step.reward_mean:.3f} "
            f"pass_rate={m.get('reward/pass_rate', 0):.3f} "
            f"loss/policy={m.get('loss/policy', 0):.4f}"
        )
