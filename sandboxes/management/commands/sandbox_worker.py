import logging
import os
import signal
from pathlib import Path

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.management.stack import ServiceError, Stack, redacted_url
from core.bounds import bounded
from core.metrics import serve_for_command
from sandboxes.autoscale import ScalePolicy, Supervisor
from sandboxes.runtimes import EXECUTORS, RuntimeUnavailable, base_runtime
from sandboxes.worker import SandboxWorker, SelfCheckFailed, self_check, session_self_check


class Command(BaseCommand):
    help = (
        "Run resident sandbox workers that consume the execution queue in Redis (REDIS_URL, or the "
        "embedded one, started for this command's duration when it is not running). Each of "
        "--concurrency slots keeps warm, isolated sandboxes; stop with Ctrl-C or SIGTERM."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--runtime",
            default="python",
            help=f"runtime to serve: {', '.join(sorted(EXECUTORS))} (default python), or "
            "RUNTIME@KEY: one environment's own queue (environment_image's pods)",
        )
        parser.add_argument(
            "--concurrency",
            type=bounded(0, 1024),
            default=os.cpu_count() or 2,
            help="concurrent executions per worker process (default: the number of CPUs)",
        )
        parser.add_argument(
            "--session-slots",
            type=bounded(0, 1024),
            default=None,
            help="slots holding sandbox sessions (persistent workspaces, sandboxes/sessions/), "
            "each with its own session zygote; default: as many as --concurrency; 0: none; "
            "with --concurrency 0, a worker that holds sessions only",
        )
        # Elastic pool (sandboxes/autoscale.py): with --max-workers this process supervises
        # between --min-workers and --max-workers worker processes of --concurrency slots each.
        parser.add_argument(
            "--min-workers",
            type=bounded(0, 1024),
            default=None,
            help="autoscale: the floor of worker processes (default 1 when --max-workers is given; "
            "alone: that many supervised workers, a fixed pool)",
        )
        parser.add_argument(
            "--max-workers",
            type=bounded(0, 1024),
            default=None,
            help="autoscale: the ceiling of worker processes; turns the autoscaler on",
        )
        parser.add_argument(
            "--scale-interval",
            type=bounded(0.01, 3600.0, float),
            default=0.5,
            help="autoscale: seconds between two readings of the demand (default 0.5)",
        )
        parser.add_argument(
            "--scale-down-delay",
            type=bounded(0.0, 86_400.0, float),
            default=10.0,
            help="autoscale: seconds the demand must stay lower before the pool shrinks "
            "(the HPA's scale-down stabilisation window; default 10)",
        )
        parser.add_argument(
            "--drain-timeout",
            type=bounded(0.0, 86_400.0, float),
            default=60.0,
            help="autoscale: seconds a worker being removed may take to finish what it "
            "holds before it is killed (default 60)",
        )

    def handle(self, *args, runtime: str, concurrency: int, session_slots=None, **options):
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        if session_slots is not None and session_slots < 0:
            raise CommandError("--session-slots must be 0 or more")
        if concurrency < 0 or (concurrency == 0 and not session_slots):
            raise CommandError(
                "--concurrency must be at least 1 (0 only with --session-slots: a worker that "
                "holds sessions only)"
            )
        if base_runtime(runtime) not in EXECUTORS:
            raise CommandError(
                f"unknown --runtime {runtime!r}; choose one of: {', '.join(sorted(EXECUTORS))}"
            )
        isolation = ""
        if concurrency > 0:  # one real execution, end to end: fail here, clearly, not per request
            try:
                checked = self_check(runtime)
            except SelfCheckFailed as exc:
                raise CommandError(" ".join(filter(None, (str(exc), exc.remedy)))) from exc
            except (RuntimeUnavailable, OSError) as exc:
                raise CommandError(f"the {runtime} sandbox cannot start here: {exc}") from exc
            isolation = (
                f"read-only root by {checked.readonly_root}, limits by {checked.enforcement}"
            )
        if (concurrency if session_slots is None else session_slots) > 0:
            try:  # sessions too: an overlay in a user namespace is one more thing to refuse
                held = session_self_check(Path(settings.VAR_DIR) / "sandbox-sessions")
            except SelfCheckFailed as exc:
                raise CommandError(" ".join(filter(None, (str(exc), exc.remedy)))) from exc
            except (RuntimeUnavailable, OSError) as exc:
                raise CommandError(f"sandbox sessions cannot start here: {exc}") from exc
            isolation = isolation or f"sessions' limits by {held}"
        serve_for_command(
            "sandbox_worker"
        )  # CRUCIBLE_METRICS_PORT: this process's (and its workers') metrics
        if options.get("max_workers") is not None or options.get("min_workers") is not None:
            return self._autoscale(runtime, concurrency, options, isolation)
        worker = SandboxWorker(
            runtime=runtime, concurrency=concurrency, session_slots=session_slots
        )
        self._serve(
            f"sandbox worker {worker.name}: runtime {runtime}, {concurrency} slot(s), "
            f"{worker.session_slot_count} session slot(s); {isolation}",
            serve=worker.serve,
            stop=worker.stop,
            on_sigterm=lambda *_: worker.stopping.set(),
        )

    def _serve(self, banner: str, *, serve, stop, on_sigterm) -> None:
        """Make sure Redis answers (the embedded one, for this command's duration, when it is the
        configured one), print ``banner`` (tests and supervisors wait for it: SIGTERM is handled
        from then on), then ``serve()`` until SIGTERM (``on_sigterm``) or Ctrl-C (``stop()``).

        Raises:
            CommandError: Redis cannot be started or reached, or was lost while serving.
        """
        try:
            with Stack() as stack:
                stack.redis()
                signal.signal(signal.SIGTERM, on_sigterm)
                self.stdout.write(banner)
                self.stdout.flush()
                try:
                    serve()
                except KeyboardInterrupt:
                    stop()
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        except redis.RedisError as exc:
            raise CommandError(f"lost Redis at {redacted_url(settings.REDIS_URL)}: {exc}") from exc

    def _autoscale(self, runtime: str, concurrency: int, options: dict, isolation: str) -> None:
        """Supervise worker processes between the bounds (sandboxes.autoscale.Supervisor)."""
        minimum = options["min_workers"] if options["min_workers"] is not None else 1
        maximum = options["max_workers"] if options["max_workers"] is not None else minimum
        try:
            policy = ScalePolicy(
                min_workers=minimum,
                max_workers=maximum,
                slots_per_worker=concurrency,
                scale_down_delay_s=options["scale_down_delay"],
                interval_s=options["scale_interval"],
                drain_timeout_s=options["drain_timeout"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        supervisor = Supervisor(runtime=runtime, policy=policy)
        # Redis is up before serve() starts the children, so they find it.
        self._serve(
            f"sandbox autoscaler: runtime {runtime}, {minimum}..{maximum} worker(s) of "
            f"{concurrency} slot(s), scale-down delay {policy.scale_down_delay_s:g} s; {isolation}",
            serve=supervisor.serve,
            stop=supervisor.stop,
            on_sigterm=supervisor.request_stop,
        )
