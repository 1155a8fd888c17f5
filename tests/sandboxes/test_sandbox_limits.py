"""Memory and process limits hold per execution, with the enforcing mechanism named."""

import pytest

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.grading import run_python_tests
from sandboxes.process import Limits
from tests.sandboxes.hostcheck import sandbox_leftovers

TESTS = "def check(candidate):\n    assert candidate() == 1\n"
needs_cgroups = pytest.mark.skipif(
    not cgroups.available(), reason="cgroup v1 memory/pids not writable here (needs root)"
)


def run(body: str, **limits):
    return run_python_tests(f"def probe():\n{body}", TESTS, "probe", limits=Limits(**limits))


def test_enforcement_is_named():
    result = run("    return 1\n")
    assert result.status == R.OK
    assert result.enforcement == ("cgroup-v1" if cgroups.available() else "rlimit")


@needs_cgroups
def test_resident_memory_over_the_cgroup_limit_is_memory_limit():
    # 300 MB touched page by page: under the 4x address-space cap, over the 128 MiB cgroup.
    body = (
        "    b = bytearray(300 * 1024 * 1024)\n"
        "    for i in range(0, len(b), 4096):\n        b[i] = 1\n    return 1\n"
    )
    result = run(body, memory_bytes=128 * 1024**2, wall_timeout_s=20, cpu_s=20)
    assert result.status == R.MEMORY_LIMIT, result


@needs_cgroups
def test_peak_memory_of_the_tree_is_measured():
    body = (
        "    b = bytearray(80 * 1024 * 1024)\n"
        "    for i in range(0, len(b), 4096):\n        b[i] = 1\n    return 1\n"
    )
    result = run(body, memory_bytes=512 * 1024**2)
    assert result.status == R.OK
    assert result.peak_memory_bytes >= 80 * 1024**2


@needs_cgroups
def test_fork_bomb_is_held_at_the_trees_pid_limit():
    body = (
        "    import os, time\n"
        "    made = 0\n"
        "    for _ in range(200):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(30)\n"
        "                os._exit(0)\n"
        "            made += 1\n"
        "        except OSError as exc:\n"
        "            print(exc)\n"
        "            break\n"
        "    return made\n"
    )
    result = run(body, processes=16, wall_timeout_s=10)
    # the tree holds unshare, python and at most 14 children: fork fails past pids.max
    assert result.status == R.FAILED
    assert "Resource temporarily unavailable" in result.stdout  # fork refused at pids.max
    assert sandbox_leftovers() == [], "forked children outlived the execution"
