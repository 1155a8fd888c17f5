"""A request line past :data:`MAX_REQUEST_LINE` bytes answers ``414 URI Too Long`` (a header line
past it ``431``), then the connection closes.

daphne serves HTTP through Twisted, whose line reader silently drops the connection when a line
exceeds its ``MAX_LENGTH`` (16 KiB): a client (or a proxy in front, which then reports a 502) sees
no answer at all. daphne has no setting for it, so :func:`install` gives Twisted's HTTP channel a
``lineLengthExceeded`` that answers first. Call it in the process that serves (console/asgi.py).
"""

from __future__ import annotations

MAX_REQUEST_LINE = 16 * 1024  # Twisted's LineReceiver.MAX_LENGTH, which this keeps


def _answer(status: bytes, message: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\nContent-Length: "
        + str(len(message)).encode()
        + b"\r\n\r\n"
        + message
    )


URI_TOO_LONG = _answer(
    b"414 URI Too Long",
    f"the URL is longer than {MAX_REQUEST_LINE} bytes; send long filters in a POST body\n".encode(),
)
HEADER_TOO_LARGE = _answer(
    b"431 Request Header Fields Too Large",
    f"a request header is longer than {MAX_REQUEST_LINE} bytes\n".encode(),
)


def install() -> None:
    """Patch Twisted's ``HTTPChannel`` (idempotent)."""
    from twisted.web import http  # noqa: PLC0415 (only the serving process needs Twisted)

    if getattr(http.HTTPChannel, "_crucible_long_lines", False):
        return

    def line_length_exceeded(self, line: bytes):
        # Before the request line is parsed, the over-long line is the request line itself.
        first = getattr(self, "_HTTPChannel__first_line", 1)
        self.transport.write(URI_TOO_LONG if first else HEADER_TOO_LARGE)
        self.transport.loseConnection()

    http.HTTPChannel.MAX_LENGTH = MAX_REQUEST_LINE
    http.HTTPChannel.lineLengthExceeded = line_length_exceeded
    http.HTTPChannel._crucible_long_lines = True
