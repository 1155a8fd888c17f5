"""Redis databases for tests that need one of their own, away from the session's queues."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings


def db_of(url: str) -> int:
    """The database number of a ``redis://host:port/N`` or ``unix:///path?db=N`` URL (0 when
    unset)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return int(dict(parse_qsl(parts.query)).get("db", 0))
    return int(parts.path.strip("/") or 0)


def isolated_db(preferred: int) -> int:
    """``preferred``, unless the session's own workers use that database (CI points REDIS_URL at
    one): then ``preferred - 2``. Queues, heartbeats and flushes there touch nobody else."""
    return preferred if preferred != db_of(settings.REDIS_URL) else preferred - 2


def url_with_db(url: str, db: int, *, user: str = "", password: str = "") -> str:
    """``url`` pointing at database ``db``, signed in as ``user`` when given (else as ``url``
    is)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = dict(parse_qsl(parts.query))
        query["db"] = str(db)
        if user:
            query.update(username=user, password=password)
        return (
            f"unix://{parts.path}?{urlencode(query)}"  # urlunsplit would drop the empty host's //
        )
    netloc = parts.netloc
    if user:
        netloc = f"{user}:{password}@{netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}"))
