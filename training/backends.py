"""Launch backends: where a run's trainer process runs.

``local`` starts ``manage.py run_trainer RUN_ID`` on this host and waits for it.
The trainer stays in the worker's process group, so stopping the worker stops it
too: no trainer outlives the worker that launched it. When the process ends without
the run reaching a final status, the run is marked ``interrupted`` if a signal
ended it (a stop, a kill: resumable) and ``failed`` otherwise, with the tail of the
trainer's log as the reason.
The Kubernetes backend is issue 5/8.
"""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings

from training import services
from training.models import TrainingRun
from training.trainer import run_dir


def _log_tail(path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def launch_local(run_id: int) -> None:
    """Run the trainer of ``run_id`` as a process on this host, until it ends.

    Idempotent: a run that is no longer ``pending`` (a redelivered Celery message)
    is left alone.
    """
    run = TrainingRun.objects.get(pk=run_id)
    if run.status != TrainingRun.PENDING:
        return
    services.run_transition(run_id=run_id, to_status=TrainingRun.LAUNCHING, reason="local backend: starting trainer process")
    directory = run_dir(run_id)
    directory.mkdir(parents=True, exist_ok=True)
    logfile = directory / "trainer.log"
    with open(logfile, "ab") as handle:
        proc = subprocess.Popen(
            [sys.executable, str(settings.BASE_DIR / "manage.py"), "run_trainer", str(run_id)],
            stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=settings.BASE_DIR,
        )
    TrainingRun.objects.filter(pk=run_id).update(backend_ref=f"pid:{proc.pid}")
    code = proc.wait()
    run.refresh_from_db()
    if not run.is_terminal:
        tail = _log_tail(logfile)
        if code < 0:
            reason = f"trainer process stopped by signal {-code} before finishing; log {logfile} ends:\n{tail}"
            to_status = TrainingRun.INTERRUPTED
        else:
            reason = f"trainer process exited with code {code} before finishing; log {logfile} ends:\n{tail}"
            to_status = TrainingRun.FAILED
        services.run_transition(run_id=run_id, to_status=to_status, reason=reason)


BACKENDS = {"local": launch_local}
