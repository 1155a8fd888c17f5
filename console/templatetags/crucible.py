"""Template filters every console page uses (a builtin library: no ``{% load %}`` needed; see
``TEMPLATES`` in console/settings.py).

``{{ value|when }}``: a time, the one way the console writes times:
``<time datetime="ISO">YYYY-MM-DD HH:MM:SS UTC</time>`` (the page scripts write the same,
``frontend/console/lib/time.js``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

register = template.Library()

TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


def when_text(value: datetime) -> str:
    """``value`` (an aware datetime) as the console writes times: ``2025-01-31 13:04:05 UTC``."""
    return value.astimezone(UTC).strftime(TIME_FORMAT)


@register.filter(is_safe=True)
def when(value) -> str:
    """A ``<time>`` element holding ``value`` in the console's one format; "" for no time."""
    if not isinstance(value, datetime):
        return ""
    return format_html(
        '<time datetime="{}">{}</time>',
        value.astimezone(UTC).isoformat(timespec="seconds"),
        when_text(value),
    )
