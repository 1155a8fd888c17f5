"""Celery tasks of the console: thin, each calls one service (routed by core/queues.py)."""

from celery import shared_task

from core.maintenance import sessions_clear_expired


@shared_task(ignore_result=True)
def sessions_clear_expired_task() -> int:
    """Delete expired sessions (Celery beat, every 6 hours); returns how many there were."""
    return sessions_clear_expired()
