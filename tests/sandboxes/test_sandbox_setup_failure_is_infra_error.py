"""A sandbox that cannot set up an execution (its own /proc refused under a masked /proc, as in
a pod without ``procMount: Unmasked``) reports ``infra_error`` with the refused step: the
platform failed, not the submission, so it is retried and never scored. A submission cannot
borrow that verdict: the setup report travels on a pipe closed before any of its code runs,
so imitating the message or the exit status of a failed setup is still its own failure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings

from sandboxes import result as R
from sandboxes.grading import run_python_tests
from tests.sandboxes.podconditions import can_emulate, wrap

TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
CORRECT = "def add(a, b):\n    return a + b\n"
CHILD = r"""
import json, sys
CORRECT = "def add(a, b):\n    return a + b\n"
sys.path.insert(0, sys.argv[1])
from sandboxes.grading import PythonGrader, run_python_tests
from sandboxes.resident import SandboxSetupFailed
from tests.sandboxes.hostcheck import sandbox_leftovers
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
out = {}
for name, program in json.load(sys.stdin).items():
    result = run_python_tests(program, TESTS, "add")
    out[name] = {"status": result.status, "detail": result.detail, "tests": len(result.tests)}
grader = PythonGrader()  # the grader's own view: which error, and what is left running after it
try:
    grader.grade(CORRECT, TESTS, "add")
except SandboxSetupFailed as exc:
    out["raised"] = {"stage": exc.stage, "remedy": exc.remedy}
out["zygotes_alive"] = grader.runner.alive and grader.driver.alive
out["leftovers"] = sandbox_leftovers(grader=grader)
grader.close()
print(json.dumps(out))
"""
FAKE_SETUP_FAILURE = (
    "import os, sys\n"
    "sys.stderr.write('sandbox setup failed: mount /proc: Operation not permitted\\n')\n"
    "sys.stderr.flush()\n"
    "os._exit(120)\n"
)


@pytest.mark.skipif(not can_emulate(), reason="emulating a masked /proc needs root and util-linux")
def test_a_refused_proc_mount_is_infra_error_naming_the_step():
    programs = {"correct": CORRECT, "crashing": "import os\nos._exit(3)\n"}
    done = subprocess.run(
        wrap([sys.executable, "-I", "-c", CHILD, str(settings.BASE_DIR)], masked_proc=True),
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in programs:  # whatever the submission: nothing of it ran, nothing is scored
        assert out[name]["status"] == R.INFRA_ERROR, out
        assert "mount /proc: Operation not permitted" in out[name]["detail"], out
        assert out[name]["tests"] == 0
    assert out["raised"]["stage"] == "tree" and "procMount: Unmasked" in out["raised"]["remedy"]
    # The zygotes live on (the fault is the pod's, not theirs) and no half-built tree is left.
    assert out["zygotes_alive"] is True and out["leftovers"] == []


@pytest.mark.parametrize("where", ["at-import", "in-the-call"])
def test_a_submission_imitating_a_setup_failure_is_still_its_own_failure(where):
    program = (
        FAKE_SETUP_FAILURE + CORRECT
        if where == "at-import"
        else (
            "def add(a, b):\n"
            + "".join("    " + line + "\n" for line in FAKE_SETUP_FAILURE.splitlines())
        )
    )
    result = run_python_tests(program, TESTS, "add")
    assert result.status in (R.CRASHED, R.FAILED), result
    assert result.tests_passed == 0 and result.tests_total == 1
    assert "sandbox setup failed" in result.stderr  # it did imitate it: the verdict did not follow


def test_a_working_sandbox_is_not_reported_as_a_setup_failure():
    result = run_python_tests(CORRECT, TESTS, "add")
    assert result.status == R.OK and result.detail == "", result
