"""Redis databases for tests that need one of their own, away from the session's queues."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings


def db_of(url: str) -> int:
    """The database number of a ``redis://host:port/N`` or ``unix:///path?db=N`` URL (0 when
    unset)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return int(dict(parse_qsl(parts.query)).get("db", 0))
    return int(parts.path.strip("/") or 0)


def sessions_dbs() -> set[int]:
    """The Redis databases this run's sessions consume: where ``REDIS_URL`` names a shared
    server, every pytest-xdist worker's (worker N takes database N above the configured one:
    tests/parallel.py), else this session's own."""
    own = db_of(settings.REDIS_URL)
    if not os.environ.get("REDIS_URL"):  # the embedded Redis: each worker has its own server
        return {own}
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return set(range(own - index, own - index + count))


def isolated_db(preferred: int) -> int:
    """``preferred``, or the first of ``preferred - 2``, ``preferred - 4``... that no session
    consumes (CI points REDIS_URL at one database per worker). Queues, heartbeats and flushes
    there touch nobody else; two tests preferring neighbouring databases never meet."""
    taken = sessions_dbs()
    return next(db for db in range(preferred, -1, -2) if db not in taken)


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
