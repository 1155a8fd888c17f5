"""Where ``mount_setattr`` is missing (gVisor answers ENOSYS, google/gvisor#13175), the zygote
makes its root read-only with one ``MS_REMOUNT`` per mount, and the sandbox holds as well as
with the syscall: the same mounts read-only and nosuid, flags locked by the pod's runtime kept,
and the adversarial corpus's attacks on the file system still fail, in the same way.

The gVisor condition is emulated for real: the sandboxes run in a child process under a seccomp
filter answering ENOSYS to ``mount_setattr`` (``seccomp_run.py``), with ``/etc`` bound
``nodev,noexec`` beforehand so that its copy in the sandbox's user namespace has locked flags
a careless remount would fail on (EPERM) or clear.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from sandboxes import result as R
from sandboxes.grading import run_python_tests
from tests.sandboxes.podconditions import can_emulate, wrap
from tests.sandboxes.test_adversarial_corpus import (
    CORPUS,
    PLANTED,
    SENTINEL,
    SENTINEL_DIR,
    TESTS,
    Case,
    wrong,
)

pytestmark = pytest.mark.skipif(
    not can_emulate(), reason="emulating gVisor's missing syscall needs root and util-linux"
)

# What an execution can reach by path, with the flags it reads there (statvfs): every mount
# but its own /tmp, /dev/shm and /proc must be read-only, and all of them nosuid.
MOUNT_TABLE = """
import os
def add(a, b):
    table = {}
    for line in open('/proc/self/mountinfo'):
        point = line.split()[4]
        flags = os.statvfs(point).f_flag
        table[point] = sorted(
            name
            for name, bit in (
                ('ro', os.ST_RDONLY), ('nosuid', os.ST_NOSUID),
                ('nodev', os.ST_NODEV), ('noexec', os.ST_NOEXEC),
            )
            if flags & bit
        )
    print(repr(table))
    return 0
"""
# Every mount point remounted read-write (a bind remount without MS_RDONLY), then a write into it.
REMOUNT_EVERY_MOUNT = wrong(
    "    import ctypes, os\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    wrote = []\n"
    "    for line in open('/proc/self/mountinfo'):\n"
    "        point = line.split()[4]\n"
    "        libc.mount(None, point.encode(), None, ctypes.c_ulong(32 | 4096), None)\n"
    "        target = os.path.join(point if os.path.isdir(point) else os.path.dirname(point), "
    "'crucible-pwned')\n"
    "        try:\n"
    "            open(target, 'w').write('x')\n"
    "            wrote.append(target)\n"
    "        except OSError:\n"
    "            pass\n"
    "    wrote = [p for p in wrote if not p.startswith(('/tmp/', '/dev/shm/', '/proc/'))]\n"
    "    return a + b if wrote else 0\n"
)
FILE_SYSTEM_CASES = [
    "write-outside-workspace",
    "symlink-out-of-workspace",
    "write-system-tree",
    "list-project-checkout",
    "read-etc-shadow",
    "remount-root-read-write",
    "nested-user-namespace-remount",
    "postgres-unix-socket",
    "redis-unix-socket",
    "planted-conftest",
    "rewrite-test-files",
]
CASES = [c for c in CORPUS if c.name in FILE_SYSTEM_CASES] + [
    Case("remount-every-mount-read-write", REMOUNT_EVERY_MOUNT, (R.FAILED,)),
    Case("mount-table", MOUNT_TABLE, (R.FAILED,)),
]

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from sandboxes.grading import PythonGrader
from sandboxes.process import Limits
cases, tests = json.load(sys.stdin)
grader = PythonGrader()
out = {}
for name, program in cases.items():
    result = grader.grade(
        program, tests, "add", limits=Limits(wall_timeout_s=5, cpu_s=5, memory_bytes=512 * 1024**2)
    )
    out[name] = {"status": result.status, "passed": result.tests_passed,
                 "total": result.tests_total, "readonly_root": result.readonly_root,
                 "stdout": result.stdout[-4000:], "stderr": result.stderr[-500:]}
grader.close()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def fallback_results():
    """The cases graded by sandboxes whose zygotes found no mount_setattr."""
    SENTINEL_DIR.mkdir(exist_ok=True)
    SENTINEL.write_text("original")
    os.chmod(SENTINEL, 0o644)
    argv = wrap(
        [sys.executable, "-I", "-c", CHILD, str(settings.BASE_DIR)],
        seccomp="no-mount-setattr",
        locked_etc=True,
    )
    done = subprocess.run(
        argv,
        input=json.dumps([{c.name: c.program for c in CASES}, TESTS]),
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    yield json.loads(done.stdout.strip().splitlines()[-1])
    SENTINEL.unlink(missing_ok=True)


def _mount_table(stdout: str) -> dict:
    """The table MOUNT_TABLE printed: mount point -> its flags, as the execution read them."""
    return ast.literal_eval(stdout.strip().splitlines()[-1])


def test_the_fallback_engages_only_where_mount_setattr_is_missing(fallback_results):
    assert {r["readonly_root"] for r in fallback_results.values()} == {"remount"}
    assert (
        run_python_tests(MOUNT_TABLE, TESTS, "add").readonly_root == "mount_setattr"
    )  # this host, unfiltered


def test_the_remounted_root_is_as_read_only_as_mount_setattr_makes_it(fallback_results):
    remounted = _mount_table(fallback_results["mount-table"]["stdout"])
    native = _mount_table(run_python_tests(MOUNT_TABLE, TESTS, "add").stdout)
    writable = {point for point, flags in remounted.items() if "ro" not in flags}
    assert writable == {"/tmp", "/dev/shm", "/proc"}  # the execution's own tmpfs and procfs only
    assert all("nosuid" in flags for flags in remounted.values()), remounted
    # The runtime's locked flags are kept (nothing cleared, and the remount was not refused)...
    assert {"nodev", "noexec"} <= set(remounted["/etc"])
    # ...and otherwise the two mechanisms leave the same mounts with the same flags.
    assert set(remounted) == set(native)
    assert {p: f for p, f in remounted.items() if p != "/etc"} == {
        p: f for p, f in native.items() if p != "/etc"
    }


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.name != "mount-table"], ids=lambda c: c.name
)
def test_file_system_attacks_still_fail_under_the_fallback(fallback_results, case):
    result = fallback_results[case.name]
    assert result["status"] != R.OK, f"false pass: {result}"
    assert result["passed"] < result["total"]
    if case.statuses:
        assert result["status"] in case.statuses, result
    assert SENTINEL.read_text() == "original"
    assert [p for p in PLANTED if p.exists()] == [], "the sandbox wrote to the host's system tree"


def test_a_profile_refusing_mount_setattr_with_eperm_takes_the_fallback_too():
    argv = wrap(
        [sys.executable, "-I", "-c", CHILD, str(settings.BASE_DIR)], seccomp="mount-setattr-refused"
    )
    cases = {"correct": "def add(a, b):\n    return a + b\n", "mount-table": MOUNT_TABLE}
    done = subprocess.run(
        argv, input=json.dumps([cases, TESTS]), capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["correct"]["status"] == R.OK and out["correct"]["readonly_root"] == "remount", out
    table = _mount_table(out["mount-table"]["stdout"])
    assert {point for point, flags in table.items() if "ro" not in flags} == {
        "/tmp",
        "/dev/shm",
        "/proc",
    }
