"""What the code under test cannot reach in a repository grading: the supervisor's memory (which
holds the nonce) and the pytest process's, from any process of the session; and what the
supervisor makes of its report pipe (sandboxes/harness/pytest_supervisor.py)."""

from __future__ import annotations

import pytest

from sandboxes.harness.pytest_supervisor import judge
from sandboxes.repository import RepositoryTests, grade_repository
from tests.environments import built

TOKEN = b"0123456789abcdef0123456789abcdef"
# The task's own tests (trusted code) probe the processes around them; a child process (no
# audit hook of ours) tries too. Each test passes only if the memory stays out of reach.
PROBES = b"""
import os, subprocess, sys


def supervisor_pid():
    return os.getppid()


def readable(pid):
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            return True
    except OSError:
        return False


def test_the_supervisor_is_out_of_reach():
    assert not readable(supervisor_pid())
    assert not os.path.exists(f"/proc/{supervisor_pid()}/fd/1") or not os.access(
        f"/proc/{supervisor_pid()}/fd", os.R_OK
    )


def test_a_child_process_cannot_read_the_pytest_process_or_the_supervisor():
    script = (
        "import sys\\n"
        "for pid in sys.argv[1:]:\\n"
        "    try:\\n"
        "        open('/proc/%s/mem' % pid, 'rb').close()\\n"
        "        print('READ', pid)\\n"
        "    except OSError:\\n"
        "        print('REFUSED', pid)\\n"
    )
    pids = [str(os.getpid()), str(supervisor_pid())]
    out = subprocess.run(
        [sys.executable, "-c", script, *pids], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["REFUSED", pids[0], "REFUSED", pids[1]]
"""
FILES = {"tests/__init__.py": b"", "tests/test_probes.py": PROBES}
TESTS = RepositoryTests(
    fail_to_pass=(),
    pass_to_pass=(
        "tests/test_probes.py::test_the_supervisor_is_out_of_reach",
        "tests/test_probes.py::test_a_child_process_cannot_read_the_pytest_process_or_the_supervisor",
    ),
    test_files=FILES,
    timeout_s=60.0,
)


@pytest.mark.slow
def test_no_process_of_the_session_reads_the_supervisor_or_the_pytest_process(session_pool):
    environment = built("python3.11-pytest").request_field()
    result = grade_repository(
        dict(FILES), TESTS, base=FILES, environment=environment, runtime=session_pool.runtime
    )
    assert result.resolved, (result.per_id, result.messages, result.detail)


def test_the_report_pipe_carries_the_hello_and_the_answer_with_the_runners_token():
    answer = judge(b"H " + TOKEN + b"\nA " + TOKEN + b" {'ran': True, 'phases': {}}\n")
    assert answer == {"ran": True, "phases": {}}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "never reported"),
        (b"A " + TOKEN + b" {'ran': True}\n", "hello"),
        (b"H " + TOKEN + b"\n", "before its answer"),
        (b"H " + TOKEN + b"\nA " + b"f" * 32 + b" {'ran': True}\n", "token"),
        (b"H " + TOKEN + b"\nPASSED\nA " + TOKEN + b" {'ran': True}\n", "not the runner's"),
        (b"H " + TOKEN + b"\nA " + TOKEN + b" {'ran': True}\nA 0 {}\n", "not the runner's"),
        (b"H " + TOKEN + b"\nA " + TOKEN + b" __import__('os')\n", "does not parse"),
        (b"H " + TOKEN + b"\n" + b"PASSED " * 100000, "token"),
    ],
    ids=[
        "empty",
        "no-hello",
        "no-answer",
        "wrong-token",
        "line-before",
        "line-after",
        "code",
        "flood",
    ],
)
def test_anything_else_on_the_pipe_voids_the_answer(data, why):
    answer = judge(data)
    assert answer.get("ran") is False
    assert why in (answer.get("forged") or answer.get("error"))
