"""The adversarial corpus: hostile submissions that must never read as a pass, and must leave
the host as it was (no process, no file, no workspace left behind, host files untouched).

Every submission answers the task wrongly or not at all, so any ``ok`` is a false pass.
A case marked ``known_hole`` is a hack the sandbox cannot stop yet: a strict xfail naming
the issue that will, so that the day it is stopped the case fails until promoted.
"""

from __future__ import annotations

import glob
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.grading import run_python_tests
from sandboxes.process import Limits

TESTS = """
def check(candidate):
    assert candidate(1, 2) == 3
    assert candidate(-1, 1) == 0
    assert candidate(10, 5) == 15
    assert abs(candidate(0.1, 0.2) - 0.3) < 1e-9
"""
HOST_SECRET = "crucible-host-secret-7f3a"
SENTINEL_DIR = Path(tempfile.gettempdir()) / "crucible-corpus-sentinel"
SENTINEL = SENTINEL_DIR / "host-file.txt"


@dataclass(frozen=True)
class Case:
    name: str
    program: str
    statuses: tuple[str, ...] = ()  # the named outcome(s) it must get; empty: any but ok
    known_hole: str = ""


def wrong(body: str = "    return 0\n", pre: str = "") -> str:
    return f"{pre}def add(a, b):\n{body}"


CORPUS = [
    Case("early-sys-exit", "import sys\nsys.exit(0)\n" + wrong("    return a + b\n"), (R.CRASHED, R.FAILED)),
    Case("early-os-exit", "import os\nos._exit(0)\n" + wrong("    return a + b\n"), (R.CRASHED,)),
    Case("raise-systemexit", "raise SystemExit(0)\n" + wrong("    return a + b\n"), (R.CRASHED, R.FAILED)),
    Case("sys-exit-in-call", wrong("    import sys\n    sys.exit(0)\n"), (R.FAILED,)),
    Case("os-exit-in-call", wrong("    import os\n    os._exit(0)\n"), (R.CRASHED,)),
    Case("keyboardinterrupt-in-call", wrong("    raise KeyboardInterrupt\n"), (R.FAILED,)),
    Case("skiptest", wrong("    import unittest\n    raise unittest.SkipTest('later')\n"), (R.FAILED,)),
    Case("atexit-exit-zero", wrong(pre="import atexit, os\natexit.register(lambda: os._exit(0))\n"), (R.FAILED,)),
    Case("syntax-error", "def add(a, b)\n    return a + b\n", (R.FAILED,)),
    Case("indentation-error", "def add(a, b):\nreturn a + b\n", (R.FAILED,)),
    Case("name-error-at-import", "undefined_name\n" + wrong("    return a + b\n"), (R.FAILED,)),
    Case("infinite-loop", wrong("    while True:\n        pass\n"), (R.TIMEOUT,)),
    Case("sleep-forever", wrong("    import time\n    time.sleep(3600)\n"), (R.TIMEOUT,)),
    Case("sigterm-ignored", wrong("    import signal\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    while True:\n        pass\n"), (R.TIMEOUT,)),
    Case("fork-bomb", wrong("    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"), (R.TIMEOUT, R.CRASHED, R.FAILED)),
    Case("memory-bomb", wrong("    x = bytearray(64 * 1024 ** 3)\n    return a + b\n"), (R.MEMORY_LIMIT,)),
    Case("infinite-output", wrong("    while True:\n        print('A' * 65536)\n"), (R.OUTPUT_LIMIT,)),
    Case("huge-file", wrong("    with open('big.bin', 'wb') as f:\n        while True:\n            f.write(b'0' * 1048576)\n"), (R.CRASHED, R.FAILED)),
    Case("deep-recursion", wrong("    return add(a, b)\n"), (R.FAILED,)),
    Case("thread-left-running", wrong("    import threading, time\n    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()\n    return 0\n")),
    Case("daemon-child-left-running", wrong("    import os, time\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(3600)\n    return 0\n")),
    Case("ctypes-segfault", wrong("    import ctypes\n    ctypes.string_at(0)\n"), (R.CRASHED,)),
    Case("network-connect", wrong("    import socket\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    return a + b\n"), (R.FAILED,)),
    Case("dns-lookup", wrong("    import socket\n    socket.getaddrinfo('example.com', 80)\n    return a + b\n"), (R.FAILED,)),
    Case("read-etc-shadow", wrong("    return len(open('/etc/shadow').read())\n"), (R.FAILED,)),
    Case("read-host-environ", wrong(f"    import os\n    blob = open('/proc/1/environ').read() + str(dict(os.environ))\n    return a + b if {HOST_SECRET!r} in blob else 0\n")),
    Case("write-outside-workspace", wrong(f"    open({str(SENTINEL)!r}, 'w').write('pwned')\n    return a + b\n"), (R.FAILED,)),
    Case("symlink-out-of-workspace", wrong(f"    import os\n    os.symlink({str(SENTINEL)!r}, 'link')\n    open('link', 'w').write('pwned')\n    return a + b\n"), (R.FAILED,)),
    Case("signal-everyone", wrong("    import os, signal\n    os.kill(-1, signal.SIGKILL)\n"), (R.CRASHED, R.FAILED)),
    Case("kill-parent", wrong("    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n")),
    Case("planted-conftest", "open('conftest.py', 'w').write('import pytest\\n')\n" + wrong()),
    Case("rewrite-test-files", wrong("    import glob\n    for p in glob.glob('**/*.py', recursive=True):\n        open(p, 'w').write('')\n    return 0\n")),
    Case("patch-builtins-abs", wrong(pre="import builtins\nbuiltins.abs = lambda x: 0\n"), (R.FAILED,)),
    Case("forge-results-without-nonce", "import os, json\nfor fd in range(3, 64):\n    try:\n        os.write(fd, (json.dumps({'event': 'test', 'id': 'assert_0', 'passed': True}) + '\\n').encode())\n    except OSError:\n        pass\nos._exit(0)\n", (R.CRASHED,)),
    Case(
        "always-equal-object",
        "class Yes:\n    def __eq__(self, other):\n        return True\n    def __sub__(self, other):\n        return 0\n    __rsub__ = __sub__\n"
        + wrong("    return Yes()\n"),
        (R.FAILED,),
    ),
    Case("always-equal-int-subclass", "class Yes(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n" + wrong("    return Yes(0)\n"), (R.FAILED,)),
    Case("read-expected-values", wrong("    import sys\n    f = sys._getframe()\n    while f and 'spec' not in f.f_locals:\n        f = f.f_back\n    return eval(str(f.f_locals['spec']))\n"), (R.FAILED,)),
    Case(
        "forge-results-with-stolen-nonce",
        "import json, os, sys\n"
        "frame = sys._getframe()\n"
        "while 'spec' not in frame.f_locals:\n"
        "    frame = frame.f_back\n"
        "spec = frame.f_locals['spec']\n"
        "for i in range(4):\n"
        "    os.write(spec['results_fd'], (json.dumps({'nonce': spec['nonce'], 'event': 'test', 'id': f'assert_{i}', 'passed': True}) + '\\n').encode())\n"
        "os.write(spec['results_fd'], (json.dumps({'nonce': spec['nonce'], 'event': 'done'}) + '\\n').encode())\n"
        "os._exit(0)\n",
        (R.CRASHED, R.FAILED),
    ),
]


@pytest.fixture(scope="module", autouse=True)
def host_sentinel():
    SENTINEL_DIR.mkdir(exist_ok=True)
    os.chmod(SENTINEL_DIR, 0o755)
    SENTINEL.write_text("original")
    os.chmod(SENTINEL, 0o644)
    yield
    SENTINEL.unlink(missing_ok=True)


def sandbox_processes(wait_s: float = 3.0) -> str:
    """What this test process's executions left running.

    With cgroups, every execution tree has its own cgroup named after this pid, and a
    cgroup with a live process in it cannot be removed: a leftover directory is a
    leftover process. Without cgroups, the live processes of the sandbox user (this
    check then assumes no other sandbox runs on the host meanwhile).
    """
    deadline = time.monotonic() + wait_s
    while True:
        if cgroups.available():
            live = [str(p) for c in cgroups.CONTROLLERS
                    for p in (cgroups.ROOT / c / cgroups.PARENT).glob(f"x-{os.getpid()}-*")]
        else:
            user = "nobody" if os.geteuid() == 0 else str(os.geteuid())
            out = subprocess.run(["ps", "-u", user, "-o", "pid=,stat=,args="], capture_output=True, text=True).stdout
            live = [line for line in out.splitlines() if line.split()[1:2] and not line.split()[1].startswith("Z")]
            live = [line for line in live if "plaindata" in line or "unshare" in line]
        if not live or time.monotonic() > deadline:
            return "\n".join(live)
        time.sleep(0.1)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.known_hole, strict=True)] if c.known_hole else []) for c in CORPUS])
def test_corpus_case_never_passes_and_leaves_host_unharmed(case, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HOST_SECRET", HOST_SECRET)
    assert sandbox_processes() == "", "a sandbox process was running before the case"
    workspaces_before = set(glob.glob(os.path.join(tempfile.gettempdir(), f"crucible-ws-{os.getpid()}-*")))
    result = run_python_tests(case.program, TESTS, "add", limits=Limits(wall_timeout_s=3, cpu_s=3, memory_bytes=512 * 1024**2))

    assert result.status != R.OK, f"false pass: {result}"
    assert result.tests_passed < result.tests_total
    if case.statuses:
        assert result.status in case.statuses, f"{case.name}: got {result.status}: {result.stderr[-500:]}"
    assert HOST_SECRET not in result.stdout + result.stderr
    assert SENTINEL.read_text() == "original"
    assert sandbox_processes() == "", "processes outlived the execution"
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), f"crucible-ws-{os.getpid()}-*"))) <= workspaces_before
