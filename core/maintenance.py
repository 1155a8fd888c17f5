"""Clean-ups of what would otherwise pile up, run by Celery beat (console/tasks.py)."""

from __future__ import annotations

from importlib import import_module

from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils import timezone


def sessions_clear_expired() -> int:
    """Delete expired sessions through the configured session engine, as ``manage.py clearsessions``
    does.

    Django keeps a database session until it is cleared, however long expired; every
    sign-in adds one.

    Returns:
        How many expired database sessions there were before (0 for engines that keep
        none in the database, e.g. signed cookies or the cache).
    """
    engine = import_module(settings.SESSION_ENGINE)
    in_database = settings.SESSION_ENGINE in (
        "django.contrib.sessions.backends.db",
        "django.contrib.sessions.backends.cached_db",
    )
    expired = Session.objects.filter(expire_date__lt=timezone.now()).count() if in_database else 0
    try:
        engine.SessionStore.clear_expired()
    except NotImplementedError:  # an engine whose sessions expire by themselves
        return 0
    return expired
