"""Small typed readers of environment variables that fail loudly on bad values.

Every setting Crucible reads from the environment goes through one of these, so a
typo such as ``CRUCIBLE_DEBUG=ture`` stops start-up with a message naming the
variable instead of silently meaning something else.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable ``name`` as a string, or ``default`` when unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """Return ``name`` parsed as a boolean.

    Raises:
        ImproperlyConfigured: the value is not one of 1/0, true/false, yes/no, on/off.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return ``name`` parsed as an integer, at least ``minimum`` when given.

    Raises:
        ImproperlyConfigured: the value is not an integer or is below ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return ``name`` split on commas, blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]
