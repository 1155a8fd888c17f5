"""Warming a web worker before it serves.

A fresh worker process pays, on its first requests, for what Python and Django load lazily: the
URL conf and every view, serializer and service module it imports (about 0.5-1 s of CPU on this
project), each template's compilation (20-60 ms a page), the database connection (PostgreSQL:
the pool). Under load those first requests hold hundreds of others behind them, which the
backpressure then refuses (503): a restarted pod would fail requests for its first seconds.
:func:`warm` pays all of it at import time, before the worker accepts a connection (granian
imports the application before a worker serves), and :func:`core.readiness.mark_ready` then
tells the readiness probe this worker is ready.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)


def _templates() -> int:
    """Compile every template of the Django template engines (the cached loader keeps them):
    returns how many."""
    from django.template import TemplateSyntaxError, engines  # noqa: PLC0415
    from django.template.backends.django import DjangoTemplates  # noqa: PLC0415

    compiled = 0
    for engine in engines.all():
        if not isinstance(engine, DjangoTemplates):
            continue
        for directory in engine.template_dirs:
            root = Path(directory)
            for path in sorted(root.rglob("*.html")):
                try:
                    engine.get_template(path.relative_to(root).as_posix())
                except TemplateSyntaxError:
                    # a template of a third-party app that needs a library not installed here:
                    # it is never rendered, so it must not stop the worker
                    log.debug("warm-up: template %s not compiled", path, exc_info=True)
                    continue
                compiled += 1
    return compiled


def warm() -> dict[str, float]:
    """Load what a worker's first requests would: the URL conf with every view it names, the
    REST framework's renderers, every template, one database query.

    Returns:
        Milliseconds each part took, and ``templates`` (how many were compiled).

    Never raises for a database that does not answer yet (the worker starts, and its
    ``/healthz`` says why it is not ready); an error in the code itself (an import, a URL
    conf) raises as it would on the first request.
    """
    from django.db import DatabaseError, connection  # noqa: PLC0415
    from django.urls import get_resolver  # noqa: PLC0415
    from rest_framework.settings import api_settings  # noqa: PLC0415

    timings: dict[str, float] = {}
    started = time.perf_counter()
    get_resolver().reverse_dict  # noqa: B018 (imports every URL conf and view module)
    api_settings.DEFAULT_RENDERER_CLASSES  # noqa: B018 (imports them)
    api_settings.DEFAULT_PARSER_CLASSES  # noqa: B018
    timings["urls_ms"] = (time.perf_counter() - started) * 1000
    mark = time.perf_counter()
    timings["templates"] = _templates()
    timings["templates_ms"] = (time.perf_counter() - mark) * 1000
    mark = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        log.warning("warm-up: the database does not answer yet: %s", exc)
    finally:
        connection.close()  # this thread serves no request; a pooled connection goes back
    timings["database_ms"] = (time.perf_counter() - mark) * 1000
    timings["total_ms"] = (time.perf_counter() - started) * 1000
    return timings
