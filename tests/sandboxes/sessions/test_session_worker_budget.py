"""The sessions of one worker stay within its budget together: a session count, a memory budget
(their cgroups live in the worker's budget cgroup, which the kernel holds to its limit: the
sessions' processes and the tmpfs pages of their workspaces, /tmp and /dev/shm) and a disk
quota (what they may write, reserved at open, plus its materialised workspaces). An open beyond
it is refused with a clear answer (SessionRefused, kind capacity, naming the limit and its
setting), and works again once a session closes."""

from __future__ import annotations

import contextlib

import pytest

from sandboxes import cgroups
from sandboxes import result as R
from sandboxes.sessions import SessionLimits, SessionRefused, Workspace, open_session
from tests.sandboxes.conftest import started_session_pool

MIB = 1024**2
SMALL = SessionLimits(
    memory_bytes=256 * MIB, workspace_bytes=32 * MIB, tmp_bytes=150 * MIB, shm_bytes=8 * MIB
)  # may write 190 MiB
FILLER = SessionLimits(
    memory_bytes=300 * MIB, workspace_bytes=8 * MIB, tmp_bytes=220 * MIB, shm_bytes=8 * MIB
)  # may write 236 MiB
WORKSPACE = Workspace.from_files({"budget.txt": "x\n"})


@contextlib.contextmanager
def pool(tmp_path, settings, *, sessions: int, memory_mib: int, disk_mib: int):
    """A worker whose sessions may be ``sessions`` at once, use ``memory_mib`` together and
    write (with their workspaces) ``disk_mib``."""
    settings.SESSION_MAX_PER_WORKER = sessions
    settings.SESSION_MEMORY_BUDGET = memory_mib * MIB
    settings.SESSION_DISK_BUDGET = disk_mib * MIB
    with started_session_pool(tmp_path / "stores", f"budget-{tmp_path.name}") as started:
        yield started


def test_an_open_past_the_count_is_refused_until_one_closes(tmp_path, settings):
    with pool(tmp_path, settings, sessions=3, memory_mib=2048, disk_mib=2048) as workers:
        opened = [open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime) for _ in "abc"]
        with pytest.raises(SessionRefused) as refused:
            open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime)
        assert refused.value.kind == "capacity"
        assert "holds 3 sessions" in str(refused.value)
        assert "CRUCIBLE_SESSION_MAX_PER_WORKER" in str(refused.value)
        opened.pop().close()
        with open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime) as again:
            assert again.exec("cat budget.txt").stdout == "x\n"
        for session in opened:
            session.close()


def test_sessions_filling_their_tmpfs_stay_within_the_memory_budget(tmp_path, settings):
    with pool(tmp_path, settings, sessions=8, memory_mib=400, disk_mib=1024) as workers:
        budget = workers.worker.budget
        assert budget.cgroup is not None, "this test needs cgroups (root)"
        peak_file = budget.cgroup.paths["memory"] / "memory.max_usage_in_bytes"
        sessions = [open_session(WORKSPACE, limits=FILLER, runtime=workers.runtime) for _ in "ab"]
        written = 0
        for session in sessions:  # 2 x 208 MiB, each within its own limit; 400 MiB together
            # in files of 4 MiB (a session's largest file is its workspace_bytes)
            command = (
                "for i in $(seq 1 52); do head -c 4M /dev/zero > /tmp/f$i || break; done; "
                "cat /tmp/f* | wc -c"
            )
            result = session.exec(command, timeout_s=60)
            if result.status == R.OK:
                written += int(result.stdout)
            else:
                assert result.status in (R.MEMORY_LIMIT, R.FAILED, R.CRASHED), result
        peak = cgroups._read_int(peak_file)
        assert 300 * MIB < peak <= 400 * MIB, f"the worker's sessions peaked at {peak} bytes"
        assert written < 2 * 208 * MIB  # the budget, not the sessions' own limits, stopped them
        for session in sessions:
            session.close()
        with open_session(WORKSPACE, limits=FILLER, runtime=workers.runtime) as again:
            assert again.exec("true").status == R.OK


def test_what_sessions_may_write_is_reserved_against_the_disk_budget(tmp_path, settings):
    with pool(tmp_path, settings, sessions=8, memory_mib=2048, disk_mib=200) as workers:
        with pytest.raises(SessionRefused, match="CRUCIBLE_SESSION_MEMORY_BUDGET"):
            open_session(  # its own memory limit is over the whole budget
                WORKSPACE,
                limits=SessionLimits(memory_bytes=3 * 1024 * MIB),
                runtime=workers.runtime,
            )
        with pytest.raises(SessionRefused, match="CRUCIBLE_SESSION_DISK_BUDGET"):
            open_session(WORKSPACE, limits=SessionLimits(), runtime=workers.runtime)  # 448 MiB
        first = open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime)  # 190 of 200
        with pytest.raises(SessionRefused, match="disk budget"):
            open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime)
        big = Workspace.from_files({"data.bin": b"\0" * (11 * MIB)})
        first.close()
        with pytest.raises(SessionRefused, match="a workspace of 11534336 bytes more"):
            open_session(big, limits=SMALL, runtime=workers.runtime)  # 190 + 11 MiB > 200
        with open_session(WORKSPACE, limits=SMALL, runtime=workers.runtime) as fits:
            assert fits.exec("true").status == R.OK
