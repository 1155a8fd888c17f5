"""supervisord, started from the final config, keeps heartbeat running: after a kill and after
a recycle (exit 0) a new heartbeat, its child, serves again; supervisorctl reports it."""

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from probe import cmdline_of, http, listener_pids, wait_port

PORT = 9300
CONF = "/app/supervisor/supervisord.conf"


def supervisord_pids():
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = cmdline_of(int(pid))
        except OSError:
            continue
        exe = Path(f"/proc/{pid}/exe").resolve().name
        if "supervisor.supervisord" in cmd and CONF in cmd and exe.startswith("python3"):
            out.append(int(pid))
    return out


def ppid(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def ctl(*args):
    return subprocess.run(
        ["python3", "-m", "supervisor.supervisorctl", "-c", CONF, *args],
        capture_output=True,
        text=True,
        timeout=15,
    )


def worker(timeout=10.0, not_pid=None):
    """(pid, served json) of the heartbeat listening on 9300 once it is a new, RUNNING child."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        pids = listener_pids(PORT)
        if len(pids) == 1:
            pid = pids.pop()
            if pid != not_pid:
                status = ctl("status", "heartbeat")
                last = status.stdout
                if "RUNNING" in status.stdout and f"pid {pid}," in status.stdout:
                    return pid
        time.sleep(0.25)
    raise AssertionError(f"no new RUNNING heartbeat on 9300 (last status: {last!r})")


@pytest.fixture(scope="module")
def sup():
    assert wait_port(PORT, 10.0), "nothing listens on 127.0.0.1:9300 after supervisord was started"
    pids = supervisord_pids()
    assert len(pids) == 1, f"supervisord processes: {pids}"
    return pids[0]


def test_worker_untouched():
    assert sorted(p.name for p in Path("/app/worker").iterdir()) == ["heartbeat.py"]
    live = hashlib.sha256(Path("/app/worker/heartbeat.py").read_bytes()).hexdigest()
    assert live == hashlib.sha256(Path("/tests/pristine/heartbeat.py").read_bytes()).hexdigest()


def check_child(sup, pid):
    assert ppid(pid) == sup, "the worker is not supervisord's child"
    cmd = cmdline_of(pid)
    assert cmd[-1] == "/app/worker/heartbeat.py" and "python3" in cmd[0], cmd
    status, headers, body = http(PORT, "/")
    assert status == 200 and headers.get("server", "").startswith("heartbeat/3.1")
    assert json.loads(body)["pid"] == pid


def test_running_under_supervisord(sup):
    check_child(sup, worker())


def test_restarted_after_kill(sup):
    pid = worker()
    os.kill(pid, signal.SIGKILL)
    new = worker(not_pid=pid)
    check_child(sup, new)


def test_restarted_after_recycle(sup):
    pid = worker()
    status, _, body = http(PORT, "/recycle")
    assert status == 200 and json.loads(body)["recycling"] is True
    new = worker(not_pid=pid)
    check_child(sup, new)


def test_only_heartbeat(sup):
    lines = [x for x in ctl("status").stdout.splitlines() if x.strip()]
    assert [x.split()[0] for x in lines] == ["heartbeat"], lines


def test_supervisorctl_controls_it(sup):
    pid = worker()
    r = ctl("restart", "heartbeat")
    assert r.returncode == 0, r.stdout + r.stderr
    check_child(sup, worker(not_pid=pid))
