"""The test database for child processes (daphne, trainers, Celery workers) that must see it.

pytest-django points this process at a test database (an SQLite file under the var dir, or
``test_<name>`` on PostgreSQL); a child process reads ``DATABASE_URL`` afresh and would open the
real one, so fixtures that start children pass it :func:`child_env`.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.db import connection


def child_database_url() -> str:
    """``DATABASE_URL`` of the test database this session created (call it inside a test that uses
    the db).

    On PostgreSQL it is the configured URL with the test database's name in place of the
    real one, so credentials, host and options (``?sslmode=...``) carry over.
    """
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{name}"
    return urlsplit(settings.DATABASE_URL)._replace(path="/" + quote(name)).geturl()


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with ``DATABASE_URL`` set to :func:`child_database_url`, plus
    ``extra``.

    ``DATABASE_URL_FILE`` is dropped: the two are exclusive (``core.env.env_secret``).
    """
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL_FILE"}
    return {**env, "DATABASE_URL": child_database_url(), **extra}
