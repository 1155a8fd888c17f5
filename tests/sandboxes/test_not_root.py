"""The sandbox as an unprivileged user: no cgroups, only the user's own uid mapped, every
capability dropped. CI runs as root, so this drives the same grader in a child process that
has become ``nobody``, with the system's Python and the standard library only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the whole suite already runs unprivileged"
)

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from sandboxes.grading import PythonGrader
from sandboxes.process import Limits
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"
HOST_FILE = sys.argv[2]
programs = {
    "correct": "def add(a, b):\n    return a + b\n",
    "wrong": "def add(a, b):\n    return a * b\n",
    "write-host-file": "def add(a, b):\n"
                       f"    open({HOST_FILE!r}, 'w').write('pwned')\n    return a + b\n",
    "remount-rw": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                  "assert libc.mount(None, b'/', None, ctypes.c_ulong(32 | 4096), None) == 0, "
                  "'remount refused'\n"
                  "def add(a, b):\n    return a + b\n",
    "timeout": "def add(a, b):\n    while True:\n        pass\n",
    "capabilities": "def add(a, b):\n"
                    "    caps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]\n"
                    "    return a + b if int(caps, 16) else 0\n",
}
grader = PythonGrader()
out = {}
for name, program in programs.items():
    result = grader.grade(program, TESTS, "add", limits=Limits(wall_timeout_s=2, cpu_s=2))
    out[name] = {"status": result.status, "passed": result.tests_passed,
                 "enforcement": result.enforcement, "detail": result.detail[:200]}
grader.close()
print(json.dumps(out))
"""


def _become_nobody() -> None:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def test_unprivileged_sandbox_isolates_with_rlimits_and_no_capabilities(tmp_path):
    host_dir = Path("/var/tmp") / f"crucible-not-root-{os.getpid()}"
    host_dir.mkdir(exist_ok=True)
    host_file = host_dir / "owned-by-nobody.txt"
    host_file.write_text("original")
    os.chown(host_dir, 65534, 65534)
    os.chown(host_file, 65534, 65534)
    try:
        done = subprocess.run(
            ["/usr/bin/python3.11", "-I", "-c", SCRIPT, str(settings.BASE_DIR), str(host_file)],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_become_nobody,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout)
        assert out["correct"]["status"] == "ok" and out["correct"]["enforcement"] == "rlimit", out
        assert out["wrong"]["status"] == "failed" and out["wrong"]["passed"] == 1
        for name in ("write-host-file", "remount-rw", "capabilities"):
            assert out[name]["status"] != "ok", (name, out[name])
        assert out["timeout"]["status"] == "timeout"
        # The file is the unprivileged user's own, so only the sandbox's view kept it safe.
        assert host_file.read_text() == "original"
    finally:
        host_file.unlink(missing_ok=True)
        host_dir.rmdir()
