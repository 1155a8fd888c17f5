"""Launch backends: where a run's trainer process runs.

Every backend offers ``launch(run_id)``, ``status(run)`` and ``cancel(run)``
(:class:`Backend`); ``BACKENDS[name](run_id)`` still launches, as the Celery task
``training.tasks.run_launch`` does.

``local`` starts ``manage.py run_trainer RUN_ID`` on this host and waits for it.
The trainer stays in the worker's process group, so stopping the worker stops it
too: no trainer outlives the worker that launched it. When the process ends without
the run reaching a final status, the run is marked ``interrupted`` if a signal
ended it (a stop, a kill: resumable) and ``failed`` otherwise, with the tail of the
trainer's log as the reason. Its status comes from the pid in ``backend_ref``
(``pid:N@HOST``), so the reconcile loop that reads it must run on the same host: one on
another host (a per-queue deployment whose ``control`` worker is not the ``trainer`` worker)
cannot see the process and leaves the run alone, saying so, rather than take a living
trainer for a lost one and start a second.

``kubernetes`` creates one batch/v1 Job per attempt (training/kubernetes.py).

:func:`run_cancel` moves a run to ``cancelled`` (``training.services.run_transition``) and then
has its backend stop what runs. It lives here, above the services, because it needs both: the
services import no backend.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from training import kubernetes, services
from training.errors import ConfigError
from training.models import TrainingRun
from training.paths import run_dir

LOCAL_STOP_GRACE_S = 10.0
"""Seconds a local trainer gets between SIGTERM and SIGKILL when a run is cancelled."""


class BackendStatus(NamedTuple):
    """What a backend says about a run's trainer.

    ``state`` is ``active``, ``succeeded``, ``failed`` or ``missing`` (no trainer there:
    it ended without a word, its worker stopped, its Job vanished); ``reason`` in words.
    """

    state: str
    reason: str = ""


@dataclass(frozen=True)
class Backend:
    """A place trainers run: ``launch(run_id)``, ``status(run) -> BackendStatus``, ``cancel(run)``.

    ``launch`` is safe to repeat (a redelivered Celery message); ``cancel`` stops whatever
    the run has there and is safe to repeat too. Calling the backend launches.
    """

    name: str
    launch: Callable[[int], None]
    status: Callable[[TrainingRun], BackendStatus]
    cancel: Callable[[TrainingRun], None]

    def __call__(self, run_id: int) -> None:
        self.launch(run_id)


# --- local ------------------------------------------------------------------------


def _log_tail(path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _local_command(run: TrainingRun) -> list[str]:
    nproc = (run.config or {}).get("nproc_per_node", 1)
    command = kubernetes.trainer_command(
        run.pk, nproc if isinstance(nproc, int) and nproc > 0 else 1
    )
    return [sys.executable, *command[1:]] if command[0] == "python" else command


def launch_local(run_id: int) -> None:
    """Run the trainer of ``run_id`` as a process on this host, until it ends.

    Takes a ``pending`` run, or a ``launching`` one no launcher holds yet (a resume).
    Idempotent: a run another launch holds, or one that moved on (a redelivered Celery
    message), is left alone.
    """
    run = services.run_launch_claim(run_id=run_id, reason="local backend: starting trainer process")
    if run is None:
        return
    directory = run_dir(run_id)
    directory.mkdir(parents=True, exist_ok=True)
    logfile = directory / "trainer.log"
    command = _local_command(run)
    command[command.index("manage.py")] = str(settings.BASE_DIR / "manage.py")
    try:
        with open(logfile, "ab") as handle:
            proc = subprocess.Popen(
                command,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=settings.BASE_DIR,
            )
    except OSError as exc:
        services.run_attempt_end(
            run_id=run_id,
            backend_ref=services.LAUNCH_CLAIM,
            to_status=TrainingRun.FAILED,
            reason=f"local backend: could not start the trainer: {exc}",
        )
        return
    ref = f"pid:{proc.pid}@{socket.gethostname()}"
    if not services.run_backend_ref_set(run_id=run_id, backend_ref=ref):
        proc.terminate()  # the run was cancelled while the process started
    code = proc.wait()
    tail = _log_tail(logfile)
    if code < 0:
        reason = (
            f"trainer process stopped by signal {-code} before finishing; log {logfile} ends:\n"
            f"{tail}"
        )
        to_status = TrainingRun.INTERRUPTED
    else:
        reason = (
            f"trainer process exited with code {code} before finishing; log {logfile} ends:\n{tail}"
        )
        to_status = TrainingRun.FAILED
    # Only while this process is still the run's attempt and the run has no final word.
    services.run_attempt_end(run_id=run_id, backend_ref=ref, to_status=to_status, reason=reason)


class OtherHost(RuntimeError):
    """The run's local trainer runs on another host: its process cannot be seen or signalled from
    here."""


def _pid(backend_ref: str) -> int | None:
    """The pid of ``pid:N`` or ``pid:N@HOST``; None for anything else.

    Raises:
        OtherHost: ``HOST`` is not this host.
    """
    kind, _, value = (backend_ref or "").partition(":")
    value, _, host = value.partition("@")
    if kind != "pid" or not value.isdigit():
        return None
    if host and host != socket.gethostname():
        raise OtherHost(
            f"the trainer (pid {value}) runs on host {host}, not {socket.gethostname()}: the local "
            f"backend's runs are reconciled by a control worker on their host (consume control and "
            f"trainer in one worker there), or use the kubernetes backend"
        )
    return int(value)


def _process_state(pid: int, run_id: int) -> str:
    """``alive``, ``gone`` (no such process, or a zombie) or ``other`` (the pid now runs another
    program)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        pass  # it exists, under another user
    proc = Path(f"/proc/{pid}")
    if not proc.exists():  # no procfs here: trust the signal
        return "alive"
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return "gone"  # it ended while being read
    if state in ("Z", "X"):
        return "gone"
    # A pid is reused after its process ends: only this run's trainer is ours to judge or signal.
    if b"run_trainer" not in argv or str(run_id).encode() not in argv:
        return "other"
    return "alive"


def local_status(run: TrainingRun) -> BackendStatus:
    """``active`` while the trainer pid in ``backend_ref`` lives (``os.kill(pid, 0)``), else
    ``missing``.

    A pid that now runs another program (reused after the trainer ended) counts as missing.

    Raises:
        OtherHost: the trainer runs on another host (the reconcile loop then leaves the run as it
            is).
    """
    pid = _pid(run.backend_ref)
    if pid is None:
        return BackendStatus(
            "missing", f"run {run.pk} records no trainer process (backend_ref {run.backend_ref!r})"
        )
    state = _process_state(pid, run.pk)
    if state == "alive":
        return BackendStatus("active", f"trainer process {pid} is alive")
    if state == "other":
        return BackendStatus(
            "missing", f"trainer process {pid} is gone (the pid now runs another program)"
        )
    return BackendStatus(
        "missing",
        f"trainer process {pid} is gone without recording an outcome "
        f"(its worker stopped, or it was killed)",
    )


def local_cancel(run: TrainingRun) -> None:
    """Stop the run's local trainer: SIGTERM, then SIGKILL after :data:`LOCAL_STOP_GRACE_S` seconds.

    Only the trainer pid is signalled (it shares the worker's process group), and only
    while that pid still runs this run's trainer. Nothing there: nothing to do. On another
    host: nothing to do here either; the trainer stops by itself at its next step when the
    run is cancelled.
    """
    try:
        pid = _pid(run.backend_ref)
    except OtherHost:
        return
    if pid is None or _process_state(pid, run.pk) != "alive":
        return
    for sig, wait_s in ((signal.SIGTERM, LOCAL_STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if _process_state(pid, run.pk) != "alive":
                return
            time.sleep(0.05)


# --- kubernetes ------------------------------------------------------------------------


def kubernetes_launch(run_id: int) -> None:
    """Create the Job of the run's next attempt and record it as the run's ``backend_ref``.

    Takes a ``pending`` run (-> ``launching``) or a ``launching`` run no launcher holds yet
    (a resume; attempt = recorded resumes + 1). Safe to repeat: a run another launch
    holds is left alone, and a Job that already exists (an earlier delivery created it) is
    adopted. A spec or API error the cluster will give again (4xx, no configuration) fails
    the run with the reason; a transient one (5xx, no connection) interrupts it, so the
    reconcile loop retries within ``max_resumes`` (:func:`training.kubernetes.job_create`).
    """
    run = services.run_launch_claim(
        run_id=run_id, reason="kubernetes backend: creating the trainer Job"
    )
    if run is None:
        return

    def end(to_status: str, reason: str) -> None:
        services.run_attempt_end(
            run_id=run_id,
            backend_ref=services.LAUNCH_CLAIM,
            to_status=to_status,
            reason=f"kubernetes backend: {reason}",
        )

    try:
        spec = kubernetes.KubernetesSpec.from_config((run.config or {}).get("kubernetes", {}))
    except ConfigError as exc:
        end(TrainingRun.FAILED, str(exc))
        return
    attempt = int((run.summary or {}).get("resumes", 0)) + 1
    try:
        ref = kubernetes.job_create(run, spec, attempt=attempt)
    except kubernetes.JobNotCreated as exc:
        end(exc.to_status, exc.reason)
        return
    if not services.run_backend_ref_set(run_id=run_id, backend_ref=ref):
        # Cancelled while the Job was being created: take it back.
        run.refresh_from_db()
        kubernetes.job_delete(run, also=[kubernetes.parse_ref(ref)])


def kubernetes_status(run: TrainingRun) -> BackendStatus:
    """The state of the run's current Job (:func:`training.kubernetes.job_status`)."""
    return BackendStatus(*kubernetes.job_status(run))


def kubernetes_cancel(run: TrainingRun) -> None:
    """Delete the run's Jobs and their pods (:func:`training.kubernetes.job_delete`)."""
    kubernetes.job_delete(run)


BACKENDS: dict[str, Backend] = {
    "local": Backend("local", launch=launch_local, status=local_status, cancel=local_cancel),
    "kubernetes": Backend(
        "kubernetes",
        launch=kubernetes_launch,
        status=kubernetes_status,
        cancel=kubernetes_cancel,
    ),
}


# --- cancel: the run first, then what its backend runs ----------------------------------------


def run_cancel(*, run_id: int, reason: str) -> bool:
    """Cancel a run and stop its trainer: delete its Jobs and pods (kubernetes), end its process
    (local).

    The run is moved to ``cancelled`` first (a trainer checks between steps and stops;
    the reconcile loop leaves a cancelled run alone), then the backend stops what runs.
    Safe to call again: an already cancelled run only has its backend cleaned up again.

    Returns:
        True if this call cancelled the run, False if it was cancelled already.

    Raises:
        services.InvalidTransition: the run already ended ``succeeded`` or ``failed``.
        Exception: from the backend (the Kubernetes API unreachable...), after the run is
            recorded cancelled; calling again retries the clean-up.
    """
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status == TrainingRun.CANCELLED:
            cancelled_now = False
        elif run.is_terminal:
            raise services.InvalidTransition(
                f"run {run_id} already ended {run.status}; there is nothing to cancel"
            )
        else:
            run = services.run_transition(
                run_id=run_id, to_status=TrainingRun.CANCELLED, reason=reason
            )
            cancelled_now = True
    backend = BACKENDS.get(run.backend)
    if backend is not None:
        backend.cancel(run)
    return cancelled_now
