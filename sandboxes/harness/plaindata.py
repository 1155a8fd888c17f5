"""Plain-data codec for values crossing between a submission and its tests.

Only exact builtin types cross: None, bool, int, float (nan and infinities too),
complex, str, bytes, list, tuple, dict, set, frozenset. A subclass (an ``int`` whose
``__eq__`` always says yes) or any other object is refused, so a submission cannot
hand the tests an object that fakes equality. Standard library only: this source is
prepended to the harness programs that run inside the sandbox.
"""

import json
import math

PLAIN_MAX_DEPTH = 64


class NotPlainData(TypeError):
    """A value that is not built only from the builtin types above."""


def encode(value, depth=0):
    """Turn ``value`` into JSON-able tagged data.

    Raises:
        NotPlainData: ``value`` holds a non-builtin type or nests deeper than 64.
    """
    if depth > PLAIN_MAX_DEPTH:
        raise NotPlainData("value nests deeper than %d levels" % PLAIN_MAX_DEPTH)
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return {"t": "v", "v": value}
    if kind is int:
        return {"t": "int", "v": str(value)}
    if kind is float:
        return {"t": "float", "v": repr(value) if not math.isfinite(value) else value}
    if kind is complex:
        return {"t": "complex", "v": [encode(value.real, depth + 1), encode(value.imag, depth + 1)]}
    if kind is bytes:
        return {"t": "bytes", "v": value.hex()}
    if kind in (list, tuple, set, frozenset):
        items = [encode(item, depth + 1) for item in value]
        return {"t": kind.__name__, "v": items}
    if kind is dict:
        return {
            "t": "dict",
            "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()],
        }
    raise NotPlainData("value of type %s is not plain data (builtin types only)" % kind.__name__)


def decode(data):
    """Invert :func:`encode`.

    Raises:
        ValueError: ``data`` is not tagged data written by :func:`encode`.
    """
    if not isinstance(data, dict) or "t" not in data:
        raise ValueError("not tagged plain data")
    tag, raw = data["t"], data.get("v")
    if tag == "v":
        if raw is None or type(raw) in (bool, str):
            return raw
    elif tag == "int":
        return int(raw)
    elif tag == "float":
        return float(raw)
    elif tag == "complex":
        return complex(decode(raw[0]), decode(raw[1]))
    elif tag == "bytes":
        return bytes.fromhex(raw)
    elif tag in ("list", "tuple", "set", "frozenset"):
        builder = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag]
        return builder(decode(item) for item in raw)
    elif tag == "dict":
        return {decode(k): decode(v) for k, v in raw}
    raise ValueError("unknown plain-data tag %r" % (tag,))


def dumps_line(message):
    """One JSON line (bytes) for a pipe."""
    return (json.dumps(message) + "\n").encode("utf-8")


def read_greeting(replies, max_bytes):
    """The submission's first reply (``{"ready": true}`` or ``{"load_error": ...}``), read by
    a driver; a process that died or sent garbage reads as a load error."""
    line = replies.readline(max_bytes)
    if not line.endswith(b"\n"):
        return {"load_error": "the submission's process exited while loading", "lost": True}
    try:
        greeting = json.loads(line)
    except ValueError:
        greeting = None
    return (
        greeting
        if isinstance(greeting, dict)
        else {"load_error": "the submission's process sent no greeting"}
    )


def describe(exc, limit=500):
    """``"Type: message"`` of an exception, at most ``limit`` characters."""
    return ("%s: %s" % (type(exc).__name__, exc))[:limit]


def driver_channels(spec):
    """A driver's ``(emit, requests, replies)``: ``emit(**fields)`` writes one event line to
    the host's results pipe; ``requests``/``replies`` are the pipes to the submission."""
    import os

    out = os.fdopen(spec["results_fd"], "wb", buffering=0)

    def emit(**fields):
        out.write(dumps_line(fields))

    return emit, os.fdopen(spec["request_fd"], "wb"), os.fdopen(spec["reply_fd"], "rb")
