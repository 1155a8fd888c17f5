"""redis, started again from the final /app/redis/redis.conf, serves the saved sessions."""

import json
import socket
from pathlib import Path

import pytest
from probe import exe_of, listener_pids, wait_port

PORT = 6390
SECRET = Path("/tests/secret").read_text().strip()
EXPECTED = json.loads(Path("/tests/expected.json").read_text())


class Resp:
    """A minimal RESP2 client (no redis-cli: it reads ~/.redisclirc and REDISCLI_* variables)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(line)

    def __call__(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()


@pytest.fixture(scope="module")
def r():
    assert wait_port(PORT, 10.0), "nothing listens on 127.0.0.1:6390 after redis was started"
    client = Resp(PORT)
    assert client("AUTH", SECRET) == "OK"
    return client


def test_listener_is_redis(r):
    pids = listener_pids(PORT)
    # /usr/bin/redis-server is a link to redis-check-rdb
    assert pids and {exe_of(p) for p in pids} == {"/usr/bin/redis-check-rdb"}
    info = r("INFO", "server")
    assert "config_file:/app/redis/redis.conf" in info
    assert "tcp_port:6390" in info


def test_loopback_only():
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    suffix = f":{PORT:04X}"
    listening = {
        x.split()[1] for x in lines if x.split()[3] == "0A" and x.split()[1].endswith(suffix)
    }
    assert listening == {f"0100007F{suffix}"}
    tcp6 = Path("/proc/net/tcp6")
    lines6 = tcp6.read_text().splitlines()[1:] if tcp6.exists() else []
    assert not [x for x in lines6 if x.split()[3] == "0A" and x.split()[1].endswith(suffix)]


def test_password_required(r):
    anon = Resp(PORT)
    reply = anon("GET", "feature:checkout_v2")
    assert isinstance(reply, RuntimeError) and "NOAUTH" in str(reply)
    reply = anon("AUTH", "not-the-password")
    assert isinstance(reply, RuntimeError)


def test_settings(r):
    assert r("CONFIG", "GET", "dir") == ["dir", "/srv/redis"]
    assert r("CONFIG", "GET", "dbfilename") == ["dbfilename", "sessions.rdb"]
    assert r("CONFIG", "GET", "save") == ["save", "900 1"]
    assert r("CONFIG", "GET", "maxmemory") == ["maxmemory", str(64 * 1024 * 1024)]
    assert r("CONFIG", "GET", "maxmemory-policy") == ["maxmemory-policy", "allkeys-lru"]
    assert r("CONFIG", "GET", "logfile") == ["logfile", "/tmp/redis-sessions.log"]
    assert r("CONFIG", "GET", "pidfile") == ["pidfile", "/tmp/redis-sessions.pid"]
    assert Path("/tmp/redis-sessions.log").stat().st_size > 0


def test_sessions_loaded(r):
    total = sum(len(EXPECTED[k]) for k in ("strings", "hashes", "lists", "sets"))
    assert r("DBSIZE") == total
    for key, value in EXPECTED["strings"].items():
        assert r("GET", key) == value, key
    for key, fields in EXPECTED["hashes"].items():
        flat = r("HGETALL", key)
        assert dict(zip(flat[::2], flat[1::2])) == fields, key
    for key, items in EXPECTED["lists"].items():
        assert r("LRANGE", key, 0, -1) == items, key
    for key, members in EXPECTED["sets"].items():
        assert sorted(r("SMEMBERS", key)) == members, key
