"""``{% frontend_importmap %}``: what the unbundled console scripts need to find plotly.js.

Bundled (``settings.FRONTEND_BUNDLED``, see :mod:`core.frontend`), the page scripts carry
their imports and the tag writes nothing. Unbundled, it writes an import map resolving the npm name
``plotly.js-dist-min`` to ``frontend/fallback/plotly.js`` (the plotly wheel's plotly.js). It goes in
``<head>``: a browser only honours an import map that precedes every module script.
"""

import json

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils.safestring import mark_safe

from core.frontend import PLOTLY_PACKAGE

register = template.Library()


@register.simple_tag(takes_context=True)
def frontend_importmap(context) -> str:
    if getattr(settings, "FRONTEND_BUNDLED", False):
        return ""
    # An import map is an inline script to the Content-Security-Policy: it carries the nonce.
    request = context.get("request")
    # str(): django-csp's lazy nonce is falsy until read, and reading it is what puts it in the
    # response's policy.
    nonce = str(getattr(request, "csp_nonce", "")) if request is not None else ""
    nonce_attr = f' nonce="{nonce}"' if nonce else ""
    # "<" escaped: the JSON cannot close the script element whatever STATIC_URL holds
    imports = json.dumps({"imports": {PLOTLY_PACKAGE: static("fallback/plotly.js")}}).replace(
        "<", "\\u003c"
    )
    return mark_safe(f'<script type="importmap"{nonce_attr}>{imports}</script>')
