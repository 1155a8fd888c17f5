"""``manage.py serve``: the console's web server in the foreground (what the web image and the
Kubernetes web pods run; ``crucible up`` starts the same command line in its stack).

granian serves ``console.asgi:application`` (pages, API and websockets) in
``CRUCIBLE_WEB_WORKERS`` processes (default one per CPU: set it to the pod's CPU limit, since a
container sees the node's CPUs); see ``console.management.stack.web_server_argv``. The process
replaces itself with the server (exec), so signals (SIGTERM on a rollout) reach it directly.
"""

import os

from django.core.management.base import BaseCommand

from console.management.stack import web_server_argv, web_workers
from core import readiness
from core.bounds import bounded


class Command(BaseCommand):
    help = "Serve the console (HTTP and websockets) with granian in several worker processes."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
        parser.add_argument(
            "--port", type=bounded(1, 65_535), default=8000, help="port (default 8000)"
        )
        parser.add_argument(
            "--workers",
            type=bounded(1, 256),
            default=None,
            help="worker processes (default CRUCIBLE_WEB_WORKERS, else one per CPU)",
        )

    def handle(self, *args, host, port, workers, **options):
        count = web_workers(workers)
        argv = web_server_argv(host, port, workers=count)
        # each worker warms before it serves; /healthz (the readiness probe) answers 200 once
        # all of them have
        os.environ.update(readiness.server_environment(count))
        self.stderr.write(f"serving on http://{host}:{port} with {count} workers")
        self.stderr.flush()
        os.execv(argv[0], argv)
