import logging
import os
import signal

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.stack import ServiceError, Stack

from sandboxes.runtimes import EXECUTORS, RuntimeUnavailable, executor_for
from sandboxes.worker import SandboxWorker


class Command(BaseCommand):
    help = (
        "Run resident sandbox workers that consume the execution queue in Redis (REDIS_URL, or the "
        "embedded one, started for this command's duration when it is not running). Each of --concurrency "
        "slots keeps warm, isolated sandboxes; stop with Ctrl-C or SIGTERM."
    )

    def add_arguments(self, parser):
        parser.add_argument("--runtime", default="python", help=f"runtime to serve: {', '.join(sorted(EXECUTORS))} (default python)")
        parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 2,
                            help="concurrent executions (default: the number of CPUs)")

    def handle(self, *args, runtime: str, concurrency: int, **options):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if concurrency < 1:
            raise CommandError("--concurrency must be at least 1")
        if runtime not in EXECUTORS:
            raise CommandError(f"unknown --runtime {runtime!r}; choose one of: {', '.join(sorted(EXECUTORS))}")
        try:  # fail here, clearly, rather than in every slot
            executor_for(runtime).close()
        except (RuntimeUnavailable, OSError) as exc:
            raise CommandError(f"the {runtime} sandbox cannot start here: {exc}") from exc
        worker = SandboxWorker(runtime=runtime, concurrency=concurrency)
        try:
            with Stack() as stack:
                stack.redis()  # the embedded Redis, for this command's duration, when it is the configured one
                signal.signal(signal.SIGTERM, lambda *_: worker.stopping.set())
                self.stdout.write(f"sandbox worker {worker.name}: runtime {runtime}, {concurrency} slot(s)")
                self.stdout.flush()
                try:
                    worker.serve()
                except KeyboardInterrupt:
                    worker.stop()
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        except redis.RedisError as exc:
            raise CommandError(f"lost Redis at {settings.REDIS_URL}: {exc}") from exc
