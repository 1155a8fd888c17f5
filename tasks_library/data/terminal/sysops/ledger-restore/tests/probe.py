"""Helpers for the verifier: wait for a port, find the program listening on it, HTTP requests.

Everything is read from /proc and plain sockets (no curl: its config files live in $HOME)."""

import http.client as httpclient
import os
import socket
import time


def wait_port(port, timeout=10.0, host="127.0.0.1"):
    """True once something accepts TCP connections on host:port (polled up to timeout s)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def _listen_inodes(port):
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, state, inode = parts[1], parts[3], parts[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def listener_pids(port):
    """Pids of the processes holding a listening socket on port."""
    inodes = _listen_inodes(port)
    pids = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                pids.add(int(pid))
                break
    return pids


def exe_of(pid):
    return os.path.realpath(f"/proc/{pid}/exe")


def cmdline_of(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]


def listener_exes(port):
    return {exe_of(pid) for pid in listener_pids(port)}


def http(port, path, method="GET", headers=None, body=None, host="127.0.0.1", timeout=5.0):
    """(status, {lower-case header: value}, body bytes)."""
    conn = httpclient.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()
