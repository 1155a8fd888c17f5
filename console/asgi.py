"""ASGI entry point: HTTP through Django, websockets through Channels.

Each web worker process (granian, started by ``console.management.stack``) serves this
application; :class:`core.response_cache.ResponseCache` answers a repeated read-only GET from
its micro-cache, and :class:`core.backpressure.Backpressure` bounds the HTTP requests in flight
in the process and answers the overflow 503 with ``Retry-After``.

The embedded default serves static files (plotly.js, the console's JS) itself
through WhiteNoise, so no separate web server is needed.
"""

import logging
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from console import warmup  # noqa: E402
from console.apikeys import WebsocketApiKeyMiddleware  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402
from core import longurl, readiness  # noqa: E402
from core.backpressure import Backpressure  # noqa: E402
from core.response_cache import ResponseCache, view_cacheable  # noqa: E402

log = logging.getLogger("console.asgi")

# A request line past 16 KiB answers 414 instead of a dropped connection (daphne's Twisted).
longurl.install()

if settings.WEB_HTTP_HANDLER == "wsgi":
    # Django's sync handler in one thread hop per request (a2wsgi's thread pool, one thread per
    # admitted request): the ASGI handler hops between the event loop and a thread for each
    # sync middleware, which costs a request of this console about a third more CPU.
    from a2wsgi import WSGIMiddleware
    from django.core.wsgi import get_wsgi_application

    wsgi_app = WSGIMiddleware(get_wsgi_application(), workers=settings.WEB_CONCURRENCY)

    async def http_app(scope, receive, send):
        # a2wsgi reads a request's body with run_coroutine_threadsafe(receive()), which takes a
        # coroutine only; granian's receive returns another kind of awaitable
        async def receive_coroutine():
            return await receive()

        await wsgi_app(scope, receive_coroutine, send)
else:
    http_app = django_asgi_app

application = Backpressure(
    ProtocolTypeRouter(
        {
            "http": http_app,
            "websocket": AllowedHostsOriginValidator(
                # A bearer API key (reading) takes the place of the session's user when sent.
                AuthMiddlewareStack(WebsocketApiKeyMiddleware(URLRouter(websocket_urlpatterns)))
            ),
        }
    ),
    concurrency=settings.WEB_CONCURRENCY,
    max_queue=settings.WEB_MAX_QUEUE,
    queue_timeout_s=settings.WEB_QUEUE_TIMEOUT_MS / 1000,
    retry_after_s=settings.WEB_RETRY_AFTER_S,
)
# Outside the backpressure: a kept answer is served without taking one of the process's slots.
application = ResponseCache(
    application,
    redis_url=settings.REDIS_URL,
    prefix=settings.WEB_RESPONSE_CACHE_PREFIX,
    ttl_ms=settings.WEB_RESPONSE_CACHE_MS,
    cacheable=view_cacheable,
    max_bytes=settings.WEB_RESPONSE_CACHE_MAX_BYTES,
    budget_bytes=settings.WEB_RESPONSE_CACHE_BUDGET_MB * 2**20,
    shared_bytes=settings.WEB_RESPONSE_CACHE_SHARED_MB * 2**20,
    csrf_cookie=settings.CSRF_COOKIE_NAME,
)
if settings.SECURE_PROXY_SSL_HEADER:
    # Behind a proxy that overwrites X-Forwarded-For/-Proto (CRUCIBLE_TRUST_X_FORWARDED_PROTO):
    # the request's client address and scheme are the proxy's report, as daphne's
    # --proxy-headers made them.
    from granian.utils.proxies import wrap_asgi_with_proxy_headers

    application = wrap_asgi_with_proxy_headers(application, trusted_hosts="*")

if readiness.launched():
    # A worker of a launched server (manage.py serve, crucible up): warm before serving (the
    # server imports this module before the worker accepts a connection), then say so to the
    # readiness probe. Tests that import the application skip both.
    warmed = warmup.warm()
    readiness.mark_ready()
    log.info("web worker %s warm in %.0f ms: %s", os.getpid(), warmed["total_ms"], warmed)
