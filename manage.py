#!/usr/bin/env python
"""Crucible's entry point: every user-facing command is a management command."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # loads the settings: a bad environment variable stops here
    except ImproperlyConfigured as exc:
        sys.exit(f"configuration error: {exc}")  # it names the variable; a traceback adds nothing
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
