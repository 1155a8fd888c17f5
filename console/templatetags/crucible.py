"""Template filters every console page uses (a builtin library: no ``{% load %}`` needed; see
``TEMPLATES`` in console/settings.py).

``{{ value|when }}``: a time, the one way the console writes times:
``<time datetime="ISO">YYYY-MM-DD HH:MM:SS UTC</time>`` (the page scripts write the same,
``frontend/console/lib/time.js``).

``{{ name|by_author }}``: ``by cora``, or "author not recorded" (never ``by ?``).

``{% for key, text, long in value|flat_items %}``: a JSON object (a task's provenance) as rows a
reader can scan, never as a Python ``repr``.
"""

from __future__ import annotations

import json
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


LONG_TEXT = 120
"""A value longer than this (or of several lines) is shown as a block."""


@register.filter
def flat_items(value) -> list[tuple[str, str, bool]]:
    """A JSON object's leaves as ``(dotted key, text, long)``: nested objects flattened
    (``bug.path``), a list of plain values joined with ", ", a list holding objects indexed
    (``failures.0.test``), numbers and booleans as JSON writes them; ``long`` when the text needs a
    block of its own. Anything but an object: one row with key ``""``."""
    rows: list[tuple[str, str, bool]] = []

    def text_of(leaf) -> str:
        return leaf if isinstance(leaf, str) else json.dumps(leaf, ensure_ascii=False)

    def walk(key: str, node) -> None:
        if isinstance(node, dict) and node:
            for name, child in node.items():
                walk(f"{key}.{name}" if key else str(name), child)
        elif isinstance(node, list) and any(isinstance(x, (dict, list)) for x in node):
            for index, child in enumerate(node):
                walk(f"{key}.{index}" if key else str(index), child)
        else:
            text = ", ".join(text_of(x) for x in node) if isinstance(node, list) else text_of(node)
            rows.append((key, text, len(text) > LONG_TEXT or "\n" in text))

    walk("", value)
    return rows


@register.filter(is_safe=True)
def by_author(name) -> str:
    """``by <name>`` (escaped), or a muted "author not recorded" where no author was recorded
    (rows older than their author field, an import that named none)."""
    if name:
        return format_html("by {}", name)
    return format_html(
        '<span class="muted none-author" title="{}">author not recorded</span>',
        "no author was recorded for it (an older row, or an import that named none)",
    )
