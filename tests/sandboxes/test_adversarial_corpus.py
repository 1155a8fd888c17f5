"""The adversarial corpus: hostile submissions that must never read as a pass, and must leave
the host as it was (no process, no file, no workspace left behind, host files untouched).

Every submission answers the task wrongly or not at all, so any ``ok`` is a false pass.
A case marked ``known_hole`` is a hack the sandbox cannot stop yet: a strict xfail naming
the issue that will, so that the day it is stopped the case fails until promoted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from sandboxes import result as R
from sandboxes.environments.mount import store
from sandboxes.environments.store import EnvironmentStore
from sandboxes.grading import run_python_tests
from sandboxes.process import Limits
from tests.environments import ENVIRONMENTS, built, grader
from tests.sandboxes.hostcheck import sandbox_leftovers

TESTS = """
def check(candidate):
    assert candidate(1, 2) == 3
    assert candidate(-1, 1) == 0
    assert candidate(10, 5) == 15
    assert abs(candidate(0.1, 0.2) - 0.3) < 1e-9
"""
HOST_SECRET = "crucible-host-secret-7f3a"
# A host file under the project's checkout, which the sandbox's root does not even show.
SENTINEL_DIR = Path(settings.VAR_DIR) / "corpus-sentinel"
SENTINEL = SENTINEL_DIR / "host-file.txt"
PROJECT_DIR = Path(__file__).resolve().parents[2]
# Paths a sandbox may try to create on the host's (read-only to it) system tree.
PLANTED = [
    Path("/usr/lib/crucible-pwned"),
    Path("/etc/crucible-pwned"),
    Path("/tmp/crucible-pwned-host"),
]
REMOUNT_RW = (
    "    import ctypes\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    libc.mount(None, b'/', None, ctypes.c_ulong(32 | 4096), None)"
    "  # MS_REMOUNT|MS_BIND, no MS_RDONLY\n"
    "    libc.mount(None, b'/etc', None, ctypes.c_ulong(32 | 4096), None)\n"
    "    open('/etc/crucible-pwned', 'w').write('x')\n"
    "    return a + b\n"
)


@dataclass(frozen=True)
class Case:
    name: str
    program: str
    statuses: tuple[str, ...] = ()  # the named outcome(s) it must get; empty: any but ok
    known_hole: str = ""


def wrong(body: str = "    return 0\n", pre: str = "") -> str:
    return f"{pre}def add(a, b):\n{body}"


CORPUS = [
    # An environment's packages and root are bound read-only: planting a module where the tests'
    # side would import it, or editing one, fails (and the store re-verifies every file after).
    Case(
        "plant-into-environment",
        wrong(
            pre="import os, sys\n"
            "for base in ['/env/site-packages', *sys.path]:\n"
            "    try:\n"
            "        open(os.path.join(base or '.', 'crucible_pwned.py'), 'w').write('x')\n"
            "        open(os.path.join(base or '.', 'json', '__init__.py'), 'a').write('x')\n"
            "    except OSError:\n"
            "        pass\n",
        ),
        (R.FAILED,),
    ),
    Case(
        "early-sys-exit",
        "import sys\nsys.exit(0)\n" + wrong("    return a + b\n"),
        (R.CRASHED, R.FAILED),
    ),
    Case("early-os-exit", "import os\nos._exit(0)\n" + wrong("    return a + b\n"), (R.CRASHED,)),
    Case(
        "raise-systemexit",
        "raise SystemExit(0)\n" + wrong("    return a + b\n"),
        (R.CRASHED, R.FAILED),
    ),
    Case("sys-exit-in-call", wrong("    import sys\n    sys.exit(0)\n"), (R.FAILED,)),
    Case("os-exit-in-call", wrong("    import os\n    os._exit(0)\n"), (R.CRASHED,)),
    Case("keyboardinterrupt-in-call", wrong("    raise KeyboardInterrupt\n"), (R.FAILED,)),
    Case(
        "skiptest",
        wrong("    import unittest\n    raise unittest.SkipTest('later')\n"),
        (R.FAILED,),
    ),
    Case(
        "atexit-exit-zero",
        wrong(pre="import atexit, os\natexit.register(lambda: os._exit(0))\n"),
        (R.FAILED,),
    ),
    Case("syntax-error", "def add(a, b)\n    return a + b\n", (R.FAILED,)),
    Case("indentation-error", "def add(a, b):\nreturn a + b\n", (R.FAILED,)),
    Case("name-error-at-import", "undefined_name\n" + wrong("    return a + b\n"), (R.FAILED,)),
    Case("infinite-loop", wrong("    while True:\n        pass\n"), (R.TIMEOUT,)),
    Case("sleep-forever", wrong("    import time\n    time.sleep(3600)\n"), (R.TIMEOUT,)),
    Case(
        "sigterm-ignored",
        wrong(
            "    import signal\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    while True:\n"
            "        pass\n"
        ),
        (R.TIMEOUT,),
    ),
    Case(
        "fork-bomb",
        wrong(
            "    import os\n"
            "    while True:\n"
            "        try:\n"
            "            os.fork()\n"
            "        except OSError:\n"
            "            pass\n"
        ),
        (R.TIMEOUT, R.CRASHED, R.FAILED),
    ),
    Case(
        "memory-bomb",
        wrong("    x = bytearray(64 * 1024 ** 3)\n    return a + b\n"),
        (R.MEMORY_LIMIT,),
    ),
    Case(
        "infinite-output", wrong("    while True:\n        print('A' * 65536)\n"), (R.OUTPUT_LIMIT,)
    ),
    Case(
        "huge-file",
        wrong(
            "    with open('big.bin', 'wb') as f:\n"
            "        while True:\n"
            "            f.write(b'0' * 1048576)\n"
        ),
        (R.CRASHED, R.FAILED),
    ),
    Case("deep-recursion", wrong("    return add(a, b)\n"), (R.FAILED,)),
    Case(
        "thread-left-running",
        wrong(
            "    import threading, time\n"
            "    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()\n"
            "    return 0\n"
        ),
    ),
    Case(
        "daemon-child-left-running",
        wrong(
            "    import os, time\n"
            "    if os.fork() == 0:\n"
            "        os.setsid()\n"
            "        time.sleep(3600)\n"
            "    return 0\n"
        ),
    ),
    Case("ctypes-segfault", wrong("    import ctypes\n    ctypes.string_at(0)\n"), (R.CRASHED,)),
    Case(
        "network-connect",
        wrong(
            "    import socket\n"
            "    socket.create_connection(('1.1.1.1', 80), timeout=2)\n"
            "    return a + b\n"
        ),
        (R.FAILED,),
    ),
    Case(
        "dns-lookup",
        wrong("    import socket\n    socket.getaddrinfo('example.com', 80)\n    return a + b\n"),
        (R.FAILED,),
    ),
    Case("read-etc-shadow", wrong("    return len(open('/etc/shadow').read())\n"), (R.FAILED,)),
    Case(
        "read-host-environ",
        wrong(
            "    import os\n"
            "    blob = open('/proc/1/environ').read() + str(dict(os.environ))\n"
            f"    return a + b if {HOST_SECRET!r} in blob else 0\n"
        ),
    ),
    Case(
        "write-outside-workspace",
        wrong(f"    open({str(SENTINEL)!r}, 'w').write('pwned')\n    return a + b\n"),
        (R.FAILED,),
    ),
    Case(
        "symlink-out-of-workspace",
        wrong(
            "    import os\n"
            f"    os.symlink({str(SENTINEL)!r}, 'link')\n"
            "    open('link', 'w').write('pwned')\n"
            "    return a + b\n"
        ),
        (R.FAILED,),
    ),
    Case(
        "write-system-tree",
        wrong("    open('/usr/lib/crucible-pwned', 'w').write('x')\n    return a + b\n"),
        (R.FAILED,),
    ),
    Case(
        "list-project-checkout",
        wrong(f"    import os\n    return a + b if os.listdir({str(PROJECT_DIR)!r}) else 0\n"),
        (R.FAILED,),
    ),
    Case(
        "postgres-unix-socket",
        wrong(
            "    import socket\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    s.connect('/var/run/postgresql/.s.PGSQL.5432')\n"
            "    return a + b\n"
        ),
        (R.FAILED,),
    ),
    Case(
        "redis-unix-socket",
        wrong(
            "    import socket\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            f"    s.connect({str(Path(settings.VAR_DIR) / 'redis.sock')!r})\n"
            "    return a + b\n"
        ),
        (R.FAILED,),
    ),
    Case("remount-root-read-write", wrong(REMOUNT_RW), (R.FAILED,)),
    Case(
        "nested-user-namespace-remount",
        wrong(
            "    import ctypes\n    ctypes.CDLL(None).unshare(0x10000000 | 0x00020000)\n"
            + REMOUNT_RW.split("\n", 1)[1]
        ),
        (R.FAILED,),
    ),
    Case(
        "signal-everyone",
        wrong("    import os, signal\n    os.kill(-1, signal.SIGKILL)\n"),
        (R.CRASHED, R.FAILED),
    ),
    Case(
        "kill-parent",
        wrong("    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n"),
    ),
    Case("planted-conftest", "open('conftest.py', 'w').write('import pytest\\n')\n" + wrong()),
    Case(
        "rewrite-test-files",
        wrong(
            "    import glob\n"
            "    for p in glob.glob('**/*.py', recursive=True):\n"
            "        open(p, 'w').write('')\n"
            "    return 0\n"
        ),
    ),
    Case(
        "patch-builtins-abs",
        wrong(pre="import builtins\nbuiltins.abs = lambda x: 0\n"),
        (R.FAILED,),
    ),
    Case(
        "forge-results-without-nonce",
        "import os, json\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, (json.dumps({'event': 'test', 'id': 'assert_0', 'passed': True})"
        " + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n",
        (R.CRASHED,),
    ),
    Case(
        "always-equal-object",
        "class Yes:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    def __sub__(self, other):\n"
        "        return 0\n"
        "    __rsub__ = __sub__\n" + wrong("    return Yes()\n"),
        (R.FAILED,),
    ),
    Case(
        "always-equal-int-subclass",
        "class Yes(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = int.__hash__\n" + wrong("    return Yes(0)\n"),
        (R.FAILED,),
    ),
    Case(
        "read-expected-values",
        wrong(
            "    import sys\n"
            "    f = sys._getframe()\n"
            "    while f and 'spec' not in f.f_locals:\n"
            "        f = f.f_back\n"
            "    return eval(str(f.f_locals['spec']))\n"
        ),
        (R.FAILED,),
    ),
    Case(
        "forge-results-with-stolen-nonce",
        "import json, os, sys\n"
        "frame = sys._getframe()\n"
        "while 'spec' not in frame.f_locals:\n"
        "    frame = frame.f_back\n"
        "spec = frame.f_locals['spec']\n"
        "for i in range(4):\n"
        "    os.write(spec['results_fd'], (json.dumps({'nonce': spec['nonce'], 'event': 'test', "
        "'id': f'assert_{i}', 'passed': True}) + '\\n').encode())\n"
        "os.write(spec['results_fd'], (json.dumps({'nonce': spec['nonce'], 'event': 'done'})"
        " + '\\n').encode())\n"
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


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.xfail(reason=c.known_hole, strict=True)] if c.known_hole else [],
        )
        for c in CORPUS
    ],
)
@pytest.mark.parametrize("environment", sorted(ENVIRONMENTS))
def test_corpus_case_never_passes_and_leaves_host_unharmed(case, environment, monkeypatch):
    """Every case in every runtime: the host's Python, the Debian root's Python 3.13, and each
    with the data-analysis packages mounted (nothing an environment adds opens a way out)."""
    monkeypatch.setenv("CRUCIBLE_HOST_SECRET", HOST_SECRET)
    sandboxes = grader(environment)
    assert sandbox_leftovers(wait_s=0, grader=sandboxes) == [], (
        "a sandbox process was running before the case"
    )
    result = run_python_tests(
        case.program,
        TESTS,
        "add",
        limits=Limits(wall_timeout_s=3, cpu_s=3, memory_bytes=512 * 1024**2),
        grader=sandboxes,
    )

    assert result.status != R.OK, f"false pass: {result}"
    assert result.tests_passed < result.tests_total
    if case.statuses:
        assert result.status in case.statuses, (
            f"{case.name}: got {result.status}: {result.stderr[-500:]}"
        )
    assert HOST_SECRET not in result.stdout + result.stderr
    assert SENTINEL.read_text() == "original"
    assert [p for p in PLANTED if p.exists()] == [], "the sandbox wrote to the host's system tree"
    assert sandbox_leftovers(grader=sandboxes) == [], "processes outlived the execution"
    layers = built(environment).request_field()
    for layer in ("root", "packages"):
        if layers[layer]:  # the environment's files are what its manifest says, byte for byte
            EnvironmentStore(store().root).verify(layers[layer])
