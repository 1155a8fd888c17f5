"""The launcher tells its console from any other server on the port."""

import http.server
import threading

import pytest

from console.management.stack import ServiceError, Stack, http_up
from tests.ports import free_port


def test_a_foreign_http_server_is_not_taken_for_the_console():
    port = free_port()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), http.server.SimpleHTTPRequestHandler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert not http_up(port)
        with pytest.raises(
            ServiceError, match=f"port {port} is taken by something that is not the console"
        ):
            Stack().check_web_port(port)
    finally:
        server.shutdown()
        server.server_close()
    Stack().check_web_port(port)  # free again: no error
