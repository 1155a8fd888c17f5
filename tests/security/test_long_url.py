"""A URL past 16 KiB gets an answer (414 URI Too Long) from daphne, not a dropped connection; a
URL under the limit is served as before."""

from __future__ import annotations

import socket

import pytest

from tests.console.conftest import serve_console


@pytest.fixture(scope="module")
def server():
    yield from serve_console()


def raw_get(base: str, target: str) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while True:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("size", [17 * 1024, 64 * 1024, 1024 * 1024])
def test_a_long_url_answers_414(server, size):
    answer = raw_get(server, "/trajectories/?task=" + "a" * size)
    assert answer.startswith(b"HTTP/1.1 414 URI Too Long\r\n"), answer[:200]
    assert b"longer than 16384 bytes" in answer


def test_a_long_header_answers_431_and_a_url_under_the_limit_is_served(server):
    assert raw_get(server, "/healthz?pad=" + "a" * 8000).startswith(b"HTTP/1.1 200")
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n")
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
