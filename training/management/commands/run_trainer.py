import faulthandler
import signal

from django.core.management.base import BaseCommand, CommandError

from core.bounds import ID_MAX, bounded
from core.metrics import serve_for_command
from training.models import TrainingRun
from training.trainer import train_run


class Command(BaseCommand):
    help = (
        "Internal: run the trainer of one launched run in this process (the local backend starts "
        "it)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "run_id", type=bounded(1, ID_MAX), help="id of a run in status 'launching'"
        )

    def handle(self, *args, run_id: int, **options):
        if not TrainingRun.objects.filter(pk=run_id).exists():
            raise CommandError(f"run {run_id} does not exist")
        # `kill -USR1 <pid>` prints every thread's stack to stderr: where a stuck trainer waits.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        serve_for_command(
            f"trainer of run {run_id}"
        )  # CRUCIBLE_METRICS_PORT: step, phases, reward, tokens/s
        try:
            train_run(run_id)
        except Exception as exc:  # the run already records the failure with its reason
            raise CommandError(f"run {run_id} failed: {type(exc).__name__}: {exc}") from exc
