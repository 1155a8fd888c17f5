"""Celery's control and validation workers, beat and the web never train: loading their task
modules must not import torch or transformers (seconds of start-up and hundreds of MB each)."""

import os
import subprocess
import sys

from django.conf import settings

PROBE = """
import os, sys, django
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
django.setup()
from console.celery import app
app.loader.import_default_modules()  # what `celery -A console worker|beat` imports at start
import console.urls  # the web's URLconf
heavy = sorted(name for name in ("torch", "transformers", "peft") if name in sys.modules)
print(",".join(heavy) or "none")
"""


def test_celery_task_modules_and_urls_load_without_torch():
    env = {**os.environ, "CRUCIBLE_VAR_DIR": str(settings.VAR_DIR)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=settings.BASE_DIR,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "none"
