"""A Debian root's interpreter pivots into the root after it started from the host's path to
it: a package it had imported before (``encodings``) must find its submodules in the root too.
A codec nobody had looked up (``cp1252``, ``ascii``) works in an execution forked from the
zygote and in a session's file operations (which read ``/proc/net/snmp`` as ASCII); both
failed with ``LookupError: unknown encoding`` before."""

import tempfile
import time
from pathlib import Path

from sandboxes import result as R
from sandboxes.grading import run_python_tests
from sandboxes.sessions import Workspace, open_session
from tests.environments import grader
from tests.sandboxes.conftest import started_session_pool

TESTS = "def check(candidate):\n    assert candidate('é') == b'\\xe9'\n"
PROGRAM = "def encode(text):\n    return text.encode('cp1252')\n"


def test_an_execution_on_the_root_looks_up_a_codec_first_used_there():
    result = run_python_tests(PROGRAM, TESTS, "encode", grader=grader("debian-python3.13"))
    assert result.status == R.OK and result.tests_passed == 1, result


def test_a_session_on_the_root_reads_its_state():
    name = f"python3.13@codecs-{time.monotonic_ns()}"
    with started_session_pool(Path(tempfile.mkdtemp(prefix="stores-")), name):
        with open_session(Workspace.from_files({"a.txt": "x"}), runtime=name) as session:
            assert session.exec("echo y > b.txt").status == R.OK
            state = session.state()
    assert "b.txt" in state.changes
