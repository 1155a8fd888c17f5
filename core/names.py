"""File names from outside (archives, repositories, datasets, agents): checked before they are kept.

A name that is not valid UTF-8 cannot be written into JSON, HTML or a UTF-8 export (Python carries
its undecodable bytes as lone surrogates, and the first encoder to meet one raises); a control
character (a newline, an escape sequence, DEL) breaks every line-oriented format a name is later
written into and can repaint a terminal; a bidirectional override (U+202E) shows a reader a name
other than the one on disk. Such names are refused where content enters Crucible, with a message
that names the file (escaped, so the message itself is printable).
"""

from __future__ import annotations

import unicodedata

# Unicode's explicit directional embeddings, overrides and isolates ("Trojan Source",
# CVE-2021-42574): format characters that reorder how a name is displayed.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(name: str) -> str:
    """``name`` as a reader may see it in a message: quoted, non-printable characters and
    undecodable bytes escaped (``'caf\\xe9.py'``)."""
    return ascii(name) if not name.isprintable() or _has_surrogates(name) else repr(name)


def _has_surrogates(name: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in name)


def name_problem(name: str) -> str | None:
    """Why ``name`` (a path from outside) cannot be kept, or None when it can.

    Returns:
        ``"is not valid UTF-8"``, ``"holds the control character U+000A"``, ``"holds the
        bidirectional control U+202E"``, or None.
    """
    if _has_surrogates(name):
        return "is not valid UTF-8"
    for char in name:
        if unicodedata.category(char) == "Cc":
            return f"holds the control character U+{ord(char):04X}"
        if char in BIDI_CONTROLS:
            return f"holds the bidirectional control U+{ord(char):04X}"
    return None


def check_name(name: str, *, what: str = "file name") -> str:
    """``name`` if :func:`name_problem` finds nothing.

    Raises:
        ValueError: ``"file name 'a\\nb' holds the control character U+000A; rename it"``.
    """
    problem = name_problem(name)
    if problem:
        raise ValueError(f"{what} {printable(name)} {problem}; rename it")
    return name


def utf8_name(raw: bytes) -> str | None:
    """The name ``raw`` bytes spell in UTF-8, or None when they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
