"""The session client API end to end: real Redis, a real worker holding real sessions."""

from __future__ import annotations

import os
import resource
import signal

import pytest

from sandboxes import queue as Q
from sandboxes import result as R
from sandboxes.sessions import (
    Session,
    SessionClosed,
    SessionError,
    SessionFileNotFound,
    SessionLimits,
    Workspace,
    open_session,
    open_sessions,
    routing,
)
from sandboxes.sessions.client import _send_and_wait
from tests.sandboxes.sessioncheck import pid_namespace, session_gone

WORKSPACE = Workspace.from_files(
    {"README.md": "hello\n", "pkg/mod.py": "VALUE = 1\n", "pkg/old.txt": "old\n"},
)


@pytest.fixture
def session(session_pool):
    with open_session(WORKSPACE, runtime=session_pool.runtime) as opened:
        yield opened


def test_exec_returns_the_structured_result(session):
    result = session.exec("echo out; echo err >&2; exit 3")
    assert result.status == R.FAILED
    assert (result.exit_code, result.signal) == (3, None)
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert result.truncated is False
    assert result.wall_ms > 0 and result.cpu_ms >= 0
    assert result.peak_memory_bytes > 0
    assert result.enforcement in ("cgroup-v1", "rlimit")
    assert session.exec("true").status == R.OK


def test_a_signal_is_a_crash(session):
    result = session.exec("kill -SEGV $$")
    assert result.status == R.CRASHED
    assert (result.exit_code, result.signal) == (None, signal.SIGSEGV)


def test_a_call_killed_by_its_cpu_limit_timed_out(session):
    """RLIMIT_CPU ends a busy loop that ignores signals with SIGKILL: it ran out of time (before
    its wall clock, here), it did not crash."""
    result = session.exec("trap '' TERM INT HUP XCPU; while :; do :; done", timeout_s=20, cpu_s=1)
    assert result.status == R.TIMEOUT, result
    assert result.signal == signal.SIGKILL and result.wall_ms < 15_000
    assert "CPU time limit of 1 s" in result.detail
    assert session.exec("kill -KILL $$").status == R.CRASHED  # a kill under the limit: a crash


def test_output_is_capped_and_flagged(session):
    result = session.exec("head -c 200000 /dev/zero | tr '\\0' x", output_cap_bytes=1000)
    assert result.status == R.OK
    assert result.stdout == "x" * 1000 and result.truncated


def test_stdin_env_and_cwd(session):
    result = session.exec(
        'cat; echo " $GREETING"; pwd; echo $HOME', stdin="in", env={"GREETING": "hi"}, cwd="pkg"
    )
    assert result.status == R.OK, result
    assert result.stdout == "in hi\n/workspace/pkg\n/tmp\n"


def test_a_working_directory_outside_the_workspace_is_refused(session):
    for cwd in ("..", "/etc", "missing"):
        result = session.exec("pwd", cwd=cwd)
        assert result.status == R.FAILED, (cwd, result)
        assert "working directory refused" in result.detail
        assert result.stdout == ""


def test_the_workspace_persists_across_calls(session):
    assert session.exec("echo made-by-exec > made.txt && mkdir -p d/e").status == R.OK
    assert session.read_text("made.txt") == "made-by-exec\n"
    assert session.write("d/e/by-api.txt", "made-by-api\n") == len("made-by-api\n")
    assert session.exec("cat d/e/by-api.txt").stdout == "made-by-api\n"
    assert session.exec("cat README.md").stdout == "hello\n"


def test_file_operations(session):
    session.write("new/deep/file.bin", b"\x00\x01binary", executable=True)
    names = {e.path: e for e in session.list(".", recursive=True)}
    assert {"README.md", "pkg", "pkg/mod.py", "new/deep/file.bin"} <= set(names)
    assert names["new/deep/file.bin"].type == "file" and names["new/deep/file.bin"].mode == 0o755
    assert names["pkg"].type == "dir"
    assert [e.path for e in session.list("pkg")] == ["pkg/mod.py", "pkg/old.txt"]
    assert session.read("new/deep/file.bin") == b"\x00\x01binary"
    assert session.read("/workspace/README.md") == b"hello\n"
    with pytest.raises(SessionFileNotFound):
        session.read("nope.txt")
    session.write("big.txt", "y" * 5000)
    with pytest.raises(SessionError) as refused:
        session.read("big.txt", max_bytes=100)
    assert refused.value.kind == "too_large"
    assert session.read("big.txt", max_bytes=100, truncate=True) == b"y" * 100
    with pytest.raises(SessionError) as directory:
        session.read("pkg")
    assert directory.value.kind == "not_a_file"


def test_diff_and_changes_against_the_start(session):
    session.exec("echo 'VALUE = 2' > pkg/mod.py && rm pkg/old.txt && echo fresh > added.txt")
    diff = session.diff()
    assert "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" in diff and "-VALUE = 1\n+VALUE = 2\n" in diff
    assert "--- a/pkg/old.txt\n+++ /dev/null\n" in diff and "-old\n" in diff
    assert "--- /dev/null\n+++ b/added.txt\n" in diff and "+fresh\n" in diff
    assert "README.md" not in diff
    changes = session.changes()
    assert changes.files == {"pkg/mod.py": b"VALUE = 2\n", "added.txt": b"fresh\n"}
    assert changes.deleted == ("pkg/old.txt",)
    session.exec("echo 'VALUE = 1' > pkg/mod.py")  # back as it was: no change any more
    assert "pkg/mod.py" not in session.changes().files


def test_closing_leaves_nothing_and_refuses_later_calls(session_pool):
    with open_session(WORKSPACE, runtime=session_pool.runtime) as opened:
        pid, namespace, cgroup = opened.pid, pid_namespace(opened.pid), opened.cgroup
        assert namespace is not None
        assert opened.exec("true").status == R.OK
    assert session_gone(pid, namespace, cgroup), "the session's processes or cgroup remain"
    with pytest.raises(SessionClosed):
        opened.exec("true")
    opened.close()  # idempotent


def test_a_group_shares_one_materialised_workspace(session_pool):
    workspace = Workspace.from_files({"group.txt": "shared\n"})
    store = session_pool.worker.store
    group = open_sessions(workspace, 4, runtime=session_pool.runtime)
    try:
        assert len({s.id for s in group}) == 4
        assert {s.slot for s in group} == set(routing.live_slots(session_pool.runtime))
        assert store.path(workspace.digest).is_dir()
        assert store.refs[workspace.digest] == 4
        group[0].write("group.txt", "mine\n")
        assert [s.read_text("group.txt") for s in group] == ["mine\n"] + ["shared\n"] * 3
    finally:
        for member in group:
            member.close()
    assert workspace.digest not in store.refs
    store.sweep(now=float("inf"))  # past its keep time: deleted
    assert not store.path(workspace.digest).exists()


def test_calls_reach_only_the_slot_that_holds_the_session(session, session_pool):
    others = [s for s in routing.live_slots(session_pool.runtime) if s != session.slot]
    assert others, "the pool has two slots"
    call = {"op": "exec", "session": session.id, "args": {"command": "true"}}
    answer = _send_and_wait(Q.connection(), others[0], [call], wait_s=30)[0]
    assert answer["error"]["kind"] == "lost"
    assert "no such session" in answer["error"]["detail"]
    assert session.exec("true").status == R.OK  # its own slot still holds it


def test_bad_arguments_are_refused_naming_them(session):
    with pytest.raises(ValueError, match="memory_bytes"):
        SessionLimits(memory_bytes=1)
    with pytest.raises(ValueError, match="unknown session limit"):
        SessionLimits.from_dict({"cpus": 4})
    with pytest.raises(ValueError, match="command"):
        session.exec("   ")
    with pytest.raises(ValueError, match="not a shell name"):
        session.exec("true", env={"BAD-NAME": "x"})
    with pytest.raises(ValueError, match="timeout_s"):
        session.exec("true", timeout_s=0)
    with pytest.raises(ValueError, match="relative"):
        Workspace.from_files({"/abs.txt": "x"})
    with pytest.raises(ValueError, match="lies under"):
        Workspace.from_files({"a": "file", "a/b": "under a file"})


def test_a_session_object_says_where_it_lives(session):
    assert isinstance(session, Session)
    assert session.slot in repr(session) and session.id.startswith("s-")
    assert session.workspace is WORKSPACE


def test_calls_work_with_descriptors_past_1024(session_pool):
    """A worker holding hundreds of sessions has descriptors past select()'s limit of 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1500 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1500, hard))
    taken = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        with open_session(WORKSPACE, runtime=session_pool.runtime) as session:
            assert session.exec("echo hi").stdout == "hi\n"
            assert session.read("README.md") == b"hello\n"
    finally:
        for fd in taken:
            os.close(fd)
