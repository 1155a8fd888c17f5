#!/usr/bin/env python
"""Crucible's entry point: every user-facing command is a management command."""

import os
import sys

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import execute_from_command_line


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    try:
        # Reading a setting loads them all: a bad environment variable stops here.
        settings.INSTALLED_APPS  # noqa: B018 (the read is the point)
    except ImproperlyConfigured as exc:
        sys.exit(f"configuration error: {exc}")  # it names the variable; a traceback adds nothing
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
