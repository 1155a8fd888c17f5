"""A sandbox worker joins the pool only where its sandbox really runs: at start it runs one
trivial execution end to end and, where the kernel refuses a step of the isolation (a pod
under the RuntimeDefault seccomp profile, a masked /proc), exits non-zero with one clear
paragraph naming the step and what to change: no traceback, no worker in the pool."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.worker import self_check
from tests.sandboxes.podconditions import can_emulate, wrap

needs_root = pytest.mark.skipif(
    not can_emulate(), reason="emulating a pod needs root and util-linux"
)


def _worker(**conditions) -> subprocess.CompletedProcess:
    argv = wrap([sys.executable, "manage.py", "sandbox_worker", "--concurrency", "1"], **conditions)
    env = dict(os.environ, CRUCIBLE_VAR_DIR=str(settings.VAR_DIR))
    return subprocess.run(
        argv, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


def _registered_workers() -> set[str]:
    return {raw.decode() for raw in Q.connection().smembers(Q.workers_key("python"))}


@needs_root
def test_without_namespaces_the_worker_refuses_to_start_with_the_reason():
    before = _registered_workers()
    done = _worker(seccomp="runtime-default")
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    error = done.stderr.strip()
    assert error.startswith("CommandError: the python sandbox cannot start here"), error
    assert "unshare: Operation not permitted" in error  # the refused step, as the kernel answered
    assert (
        "RuntimeDefault" in error
        and "components/gvisor" in error
        and "sandbox-nested-namespaces" in error
    )
    assert len(error.splitlines()) == 1  # one paragraph
    assert (
        "sandbox worker" not in done.stdout and _registered_workers() == before
    )  # never joined the pool


@needs_root
def test_under_a_masked_proc_the_worker_refuses_to_start_with_the_reason():
    # The zygote starts (its namespaces and root are fine); only an execution's own /proc is
    # refused, which the start-up execution finds.
    before = _registered_workers()
    done = _worker(masked_proc=True)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    error = done.stderr.strip()
    assert error.startswith(
        "CommandError: the python sandbox started, but a trivial execution failed"
    ), error
    assert "mount /proc: Operation not permitted" in error
    assert "procMount: Unmasked" in error and "components/gvisor" in error
    assert "sandbox worker" not in done.stdout and _registered_workers() == before


def test_the_self_check_runs_one_execution_and_names_the_mechanisms_in_force():
    result = self_check("python")
    assert result.status == R.OK and result.tests_passed == result.tests_total == 1
    # The primary mechanism where the kernel has it (Linux 5.12+, no filter in the way):
    # the fallback engages only where mount_setattr is missing.
    assert result.readonly_root == "mount_setattr"
    assert result.enforcement in ("cgroup-v1", "rlimit")
