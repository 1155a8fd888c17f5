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
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off"
    )


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


def env_secret(name: str, default: str = "") -> str:
    """Return the secret ``name`` from the environment, or from the file that ``<name>_FILE``
    names (Kubernetes and Docker mount secrets as files), or ``default`` when neither is set.

    The file's surrounding whitespace (the newline ``echo KEY > file`` leaves) is stripped.
    The two forms are exclusive, as in the official PostgreSQL and Redis images.

    Raises:
        ImproperlyConfigured: both ``name`` and ``<name>_FILE`` are set, or the file is
            missing, unreadable, not UTF-8 or empty; the message names the variable and the path.
    """
    file_var = f"{name}_FILE"
    value = os.environ.get(name, "")
    path = os.environ.get(file_var, "")
    if value and path:
        raise ImproperlyConfigured(f"both {name} and {file_var} are set; set only one of them")
    if not path:
        return value or default
    try:
        with open(path, encoding="utf-8") as handle:
            secret = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImproperlyConfigured(
            f"{file_var}={path!r} cannot be read ({reason}); mount the secret "
            f"there or set {name} instead"
        ) from exc
    if not secret:
        raise ImproperlyConfigured(
            f"{file_var}={path!r} is empty; it must hold the value of {name}"
        )
    return secret
