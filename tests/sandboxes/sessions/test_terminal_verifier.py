"""A terminal task's verifier runs on a final state in a fresh session: its reward file is read
(binary or fractional), a missing or malformed one is no reward, a verifier past its time limit
is a timeout; the task's services are started again from the state and probed; a service the
agent's state turned hostile cannot write the reward file or the tests (Landlock); the
verifier's Python does not import what the agent left in the working directory."""

import time

import pytest

from sandboxes import result as R
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import parse
from sandboxes.sessions.terminal import run_verifier
from tests.environments import TERMINAL_DEBIAN_PACKAGES
from tests.sandboxes.conftest import started_session_pool

CHECK_ANSWER = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.fixture(scope="module")
def environment():
    return materialise(
        parse("python3.13", [], debian_packages=TERMINAL_DEBIAN_PACKAGES)
    ).request_field()


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with started_session_pool(
        tmp_path_factory.mktemp("session-stores"), f"python3.13@verifier-{time.monotonic_ns()}"
    ) as started:
        yield started


def verify(pool, environment, state, tests, *, services=(), timeout_s=30.0):
    return run_verifier(
        state,
        executable=set(),
        state_dirs=["/app"],
        tests=tests,
        workdir="/app",
        services=services,
        timeout_s=timeout_s,
        environment=environment,
        runtime=pool.runtime,
    )


def test_the_reward_file_is_the_reward(pool, environment):
    right = verify(
        pool, environment, {"app/answer.txt": b"42\n"}, {"test.sh": CHECK_ANSWER.encode()}
    )
    assert (right.status, right.reward) == ("ok", 1.0), right
    assert right.as_result().status == R.OK and right.as_result().tests[0].score == 1.0
    wrong = verify(
        pool, environment, {"app/answer.txt": b"41\n"}, {"test.sh": CHECK_ANSWER.encode()}
    )
    assert (wrong.status, wrong.reward) == ("ok", 0.0), wrong
    assert wrong.as_result().status == R.FAILED


def test_a_fraction_is_partial_credit_and_bad_files_are_no_reward(pool, environment):
    state = {"app/answer.txt": b"42\n"}
    cases = {
        "echo 0.25 > /logs/verifier/reward.txt": ("ok", 0.25),
        "echo '{\"reward\": 0.5}' > /logs/verifier/reward.json": ("ok", 0.5),
        "echo 7 > /logs/verifier/reward.txt": ("failed", 0.0),
        "echo lots > /logs/verifier/reward.txt": ("failed", 0.0),
        "echo nan > /logs/verifier/reward.txt": ("failed", 0.0),
        "true": ("failed", 0.0),
    }
    for script, expected in cases.items():
        outcome = verify(pool, environment, state, {"test.sh": f"#!/bin/bash\n{script}\n".encode()})
        assert (outcome.status, outcome.reward) == expected, (script, outcome)
    partial = verify(
        pool, environment, state, {"test.sh": b"echo 0.25 > /logs/verifier/reward.txt\n"}
    ).as_result()
    assert partial.status == R.FAILED and partial.tests[0].score == 0.25


def test_a_verifier_past_its_limit_is_a_timeout(pool, environment):
    outcome = verify(
        pool,
        environment,
        {"app/answer.txt": b"42\n"},
        {"test.sh": b"sleep 30; echo 1 > /logs/verifier/reward.txt\n"},
        timeout_s=2.0,
    )
    assert outcome.status == R.TIMEOUT and outcome.reward == 0.0, outcome


SERVER = """import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = open("/app/message.txt", "rb").read()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 8099), H).serve_forever()
"""
PROBE = """#!/bin/bash
for i in $(seq 50); do curl -fsS http://127.0.0.1:8099/ > /tmp/got && break; sleep 0.2; done
sleep 1
if [ "$(cat /tmp/got)" = "hello" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def test_services_start_again_from_the_final_state_and_are_probed(pool, environment):
    state = {"app/server.py": SERVER.encode(), "app/message.txt": b"hello"}
    outcome = verify(
        pool, environment, state, {"test.sh": PROBE.encode()}, services=["python3 /app/server.py"]
    )
    assert (outcome.status, outcome.reward) == ("ok", 1.0), outcome
    assert outcome.isolation == "landlock"
    broken = dict(state, **{"app/message.txt": b"goodbye"})
    outcome = verify(
        pool, environment, broken, {"test.sh": PROBE.encode()}, services=["python3 /app/server.py"]
    )
    assert outcome.reward == 0.0, outcome


HOSTILE_SERVICE = """import os, time
os.makedirs("/logs/verifier", exist_ok=True)
for _ in range(100):
    for path in ("/logs/verifier/reward.txt", "/workspace/logs/verifier/reward.txt"):
        try:
            open(path, "w").write("1")
        except OSError as exc:
            open("/app/refused.txt", "a").write(f"{path}: {exc.strerror}\\n")
    try:
        open("/tests/test.sh", "w").write("echo 1 > /logs/verifier/reward.txt")
    except OSError as exc:
        open("/app/refused.txt", "a").write(f"/tests: {exc.strerror}\\n")
    for path in ("/tests/test.sh", "/workspace/tests/test.sh"):
        try:
            open(path).read()
        except OSError as exc:
            open("/app/refused.txt", "a").write(f"read {path}: {exc.strerror}\\n")
    time.sleep(0.05)
"""


def test_a_hostile_service_cannot_write_the_reward_or_the_tests(pool, environment):
    verifier = (
        '#!/bin/bash\nsleep 2\necho "$(sort -u /app/refused.txt)" >&2\n'
        "echo 0 > /logs/verifier/reward.txt\n"
    )
    outcome = verify(
        pool,
        environment,
        {"app/service.py": HOSTILE_SERVICE.encode()},
        {"test.sh": verifier.encode()},
        services=["python3 /app/service.py"],
    )
    assert (outcome.status, outcome.reward, outcome.isolation) == ("ok", 0.0, "landlock"), outcome
    assert "/logs/verifier/reward.txt: Permission denied" in outcome.output, outcome
    assert "/workspace/logs/verifier/reward.txt: Permission denied" in outcome.output, outcome
    assert "read /tests/test.sh: Permission denied" in outcome.output, outcome  # the tests
    assert "read /workspace/tests/test.sh: Permission denied" in outcome.output, outcome


def test_the_verifiers_python_imports_nothing_from_the_working_directory(pool, environment):
    planted = {
        "app/answer.txt": b"41\n",
        "app/json.py": b"import os\nopen('/logs/verifier/reward.txt','w').write('1')\n",
        "app/sitecustomize.py": b"open('/logs/verifier/reward.txt','w').write('1')\n",
    }
    verifier = (
        "#!/bin/bash\ncd /app\npython3 -c 'import json; print(json.dumps(1))'\n"
        'if [ "$(cat /app/answer.txt)" = "42" ]; then echo 1 > /logs/verifier/reward.txt; '
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    outcome = verify(pool, environment, planted, {"test.sh": verifier.encode()})
    assert (outcome.status, outcome.reward) == ("ok", 0.0), outcome


def test_the_verifier_runs_the_agents_code_confined(pool, environment):
    """A verifier that runs the agent's own script (a cron job's) through
    ``/crucible/bin/confine``: the script still does its work in the state directories, and its
    attempts on the reward (written, made read-only) and on the tests are refused."""
    job = (
        b"#!/bin/bash\necho backed-up > /app/backup.txt\n"
        b"echo 1 > /logs/verifier/reward.txt && chmod 444 /logs/verifier/reward.txt\n"
        b"cat /tests/test.sh > /app/stolen.txt\n"
    )
    verifier = (
        "#!/bin/bash\n/crucible/bin/confine 'bash /app/job.sh' 2> /tmp/job.err\n"
        "cat /tmp/job.err\n"
        'if [ "$(cat /app/backup.txt)" = backed-up ] && [ ! -s /app/stolen.txt ]; then '
        "echo 0.5 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    outcome = verify(pool, environment, {"app/job.sh": job}, {"test.sh": verifier.encode()})
    assert (outcome.status, outcome.reward) == ("ok", 0.5), outcome
    assert "/logs/verifier/reward.txt: Permission denied" in outcome.output, outcome
    assert "/tests/test.sh: Permission denied" in outcome.output, outcome
