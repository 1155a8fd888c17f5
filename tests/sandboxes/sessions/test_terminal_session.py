"""A terminal session: a state at absolute paths on a Debian root that has Debian packages of its
own installed (built in a user namespace), each state directory mounted at its path, the root's
files of a mounted directory beside the task's, everything else read-only, a service kept
running on the session's loopback, and the session's diff seeing every change in its state."""

import time

import pytest

from benchmarks.terminal_tasks import NGINX_CONF  # nginx as an unprivileged user, on 8080
from sandboxes import result as R
from sandboxes.environments.build import materialise
from sandboxes.environments.spec import parse
from sandboxes.sessions import SessionError, SessionLimits, Workspace, open_session
from tests.environments import TERMINAL_DEBIAN_PACKAGES
from tests.sandboxes.conftest import started_session_pool

STATE = Workspace.from_files(
    {
        "app/data.json": '{"answer": 42}\n',
        "app/www/index.html": "hello from the task\n",
        "etc/nginx/nginx.conf": NGINX_CONF,
        "tests/test.sh": "#!/bin/bash\necho verifier\n",
    },
    executable=["tests/test.sh"],
)
STATE_DIRS = [["/app", "rw"], ["/etc/nginx", "rw"], ["/tests", "ro"]]


@pytest.fixture(scope="module")
def environment():
    return materialise(parse("python3.13", [], debian_packages=TERMINAL_DEBIAN_PACKAGES))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with started_session_pool(
        tmp_path_factory.mktemp("session-stores"), f"python3.13@terminal-{time.monotonic_ns()}"
    ) as started:
        yield started


@pytest.fixture
def session(pool, environment):
    opened = open_session(
        STATE,
        runtime=pool.runtime,
        environment=environment.request_field(),
        state_dirs=STATE_DIRS,
        limits=SessionLimits(keep_processes=True),
    )
    yield opened
    opened.close()


def run(session, command, **options) -> R.ExecutionResult:
    return session.exec(command, cwd="/app", **options)


def test_the_state_is_at_its_paths_beside_the_roots_files(session):
    done = run(session, "pwd; cat data.json; jq .answer /app/data.json; ls /etc/nginx")
    assert done.status == R.OK, done
    lines = done.stdout.splitlines()
    assert lines[0] == "/app" and lines[1] == '{"answer": 42}' and lines[2] == "42"
    # the task's nginx.conf shadows Debian's; Debian's mime.types is still there
    assert {"nginx.conf", "mime.types"} <= set(lines[3:])
    conf = run(session, "head -2 /etc/nginx/nginx.conf")
    assert conf.stdout.startswith("worker_processes 1;\npid /tmp/nginx.pid;"), conf


def test_outside_its_state_the_root_is_read_only(session):
    for target in ("/etc/passwd", "/usr/bin/jq", "/etc/new-file", "/tests/test.sh", "/opt"):
        done = run(session, f"echo x >> {target} || mkdir {target}/x")
        assert done.status == R.FAILED, (target, done)
        assert "Read-only file system" in done.stderr or "Permission denied" in done.stderr, done
    assert run(session, "cat /tests/test.sh").stdout == "#!/bin/bash\necho verifier\n"


def test_a_service_runs_on_the_sessions_loopback_between_calls(session):
    started = run(session, "nginx -c /etc/nginx/nginx.conf 2>&1; sleep 0.3")
    assert started.status == R.OK, started
    probe = run(session, "curl -fsS http://127.0.0.1:8080/index.html")
    assert probe.status == R.OK and probe.stdout == "hello from the task\n", probe
    listeners = run(session, "cat /proc/net/tcp")
    assert ":1F90" in listeners.stdout  # port 8080, in this session's network namespace only


def test_the_diff_sees_changes_in_every_state_directory(session):
    done = run(
        session,
        "echo '{\"answer\": 43}' > data.json && echo fixed > /app/www/new.html"
        " && sed -i 's/8080/8081/' /etc/nginx/nginx.conf && rm /etc/nginx/mime.types",
    )
    assert done.status == R.OK, done
    changes = session.changes()
    assert changes.files["app/data.json"] == b'{"answer": 43}\n'
    assert changes.files["app/www/new.html"] == b"fixed\n"
    assert b"listen 127.0.0.1:8081" in changes.files["etc/nginx/nginx.conf"]
    assert "etc/nginx/mime.types" in changes.deleted
    assert not any(path.startswith("tests/") for path in changes.files)


def test_a_call_may_start_in_a_state_directory_only(session):
    assert run(session, "pwd").stdout == "/app\n"
    assert session.exec("pwd", cwd="/etc/nginx").stdout == "/etc/nginx\n"
    refused = session.exec("pwd", cwd="/usr/bin")
    assert refused.status != R.OK


def test_a_state_directory_through_a_link_or_where_the_sandbox_mounts_is_refused(pool, environment):
    for state_dirs, says in (
        ([["/bin/tools", "rw"]], "a link in the environment's root"),
        ([["/proc/x", "rw"]], "where the sandbox mounts its own"),
        ([["relative", "rw"]], "is not an absolute path"),
        ([["/app", "rwx"]], "is not [path, 'rw'|'ro']"),
    ):
        with pytest.raises(SessionError, match="state director") as caught:
            open_session(
                STATE,
                runtime=pool.runtime,
                environment=environment.request_field(),
                state_dirs=state_dirs,
            )
        assert says in str(caught.value), caught.value
