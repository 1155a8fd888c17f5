"""ASGI entry point: HTTP through Django, websockets through Channels.

The embedded default serves static files (plotly.js, the console's JS) itself
through WhiteNoise, so no separate web server is needed.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.apikeys import WebsocketApiKeyMiddleware  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402
from core import longurl  # noqa: E402

# A request line past 16 KiB answers 414 instead of a dropped connection (daphne's Twisted).
longurl.install()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            # A bearer API key (reading) takes the place of the session's user when sent.
            AuthMiddlewareStack(WebsocketApiKeyMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)
