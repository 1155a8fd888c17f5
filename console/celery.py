"""The Celery application. Tasks stay thin: they take ids and call one service.

Queues and routes: core/queues.py and the CELERY_* settings. Workers log through
Django's ``LOGGING`` (plain or JSON, with the log context) and, with ``CRUCIBLE_METRICS_PORT``
set, serve their task metrics (core/metrics.py).
"""

import logging.config
import os

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun, worker_init
from django.conf import settings

from core import metrics

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("crucible")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

task_prerun.connect(metrics.celery_task_prerun, weak=False)
task_postrun.connect(metrics.celery_task_postrun, weak=False)


@setup_logging.connect(weak=False)
def logging_from_settings(loglevel=None, **_kwargs) -> None:
    """Keep Django's ``LOGGING`` (instead of Celery's own handlers), at the ``--loglevel`` given."""
    logging.config.dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


@worker_init.connect(weak=False)
def metrics_serve(**_kwargs) -> None:
    """The worker's metrics endpoint, when ``CRUCIBLE_METRICS_PORT`` is set (once, in the main
    process)."""
    metrics.serve_from_env("celery worker")
