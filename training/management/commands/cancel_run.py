from django.core.management.base import BaseCommand, CommandError

from core.bounds import ID_MAX, bounded
from tasks_library.services import command_line_author
from training.backends import run_cancel
from training.models import TrainingRun
from training.services import InvalidTransition


class Command(BaseCommand):
    help = (
        "Cancel a training run and stop its trainer: its Kubernetes Jobs and pods are deleted, or "
        "its local trainer process is stopped (SIGTERM, then SIGKILL). Safe to repeat: a "
        "cancelled run is cleaned up again."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=bounded(1, ID_MAX), help="id of the run to cancel")
        parser.add_argument(
            "--reason", default="", help="why, recorded on the run (default: cancelled by USER)"
        )

    def handle(self, *args, run_id: int, reason: str, **options):
        if not TrainingRun.objects.filter(pk=run_id).exists():
            raise CommandError(f"run {run_id} does not exist")
        reason = reason.strip() or f"cancelled with cancel_run by {command_line_author()}"
        try:
            cancelled_now = run_cancel(run_id=run_id, reason=reason)
        except InvalidTransition as exc:
            raise CommandError(str(exc)) from exc
        except (
            Exception
        ) as exc:  # the backend could not be reached: the run is cancelled, its clean-up is not
            raise CommandError(
                f"run {run_id} is cancelled, but stopping its trainer failed "
                f"({type(exc).__name__}: {exc}); run cancel_run {run_id} again"
            ) from exc
        if cancelled_now:
            self.stdout.write(f"run {run_id} cancelled; its trainer is stopped")
        else:
            self.stdout.write(f"run {run_id} was already cancelled; cleaned up its trainer again")
