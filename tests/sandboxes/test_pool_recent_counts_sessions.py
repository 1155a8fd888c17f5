"""The sandbox pool's recent executions count session work (they once counted queued gradings
only, so an agent run's thousands of tool calls were invisible on the pool panel): each call of a
session is recorded under ``session_<op>``, an exec with its own status."""

from __future__ import annotations

import pytest

from sandboxes import pool_stats
from sandboxes.sessions import SessionFileNotFound, Workspace, open_session


def test_session_calls_are_recent_executions(session_pool):
    runtime = session_pool.runtime
    assert pool_stats.runtime_stats(runtime)["recent"] == 0
    with open_session(Workspace.from_files({"a.py": "x = 1\n"}), runtime=runtime) as session:
        assert session.exec("true").status == "ok"
        assert session.exec("exit 3").status == "failed"
        session.write("b.py", "y = 2\n")
        with pytest.raises(SessionFileNotFound):
            session.read_text("missing.py")
    stats = pool_stats.runtime_stats(runtime)
    assert stats["statuses"]["session_exec"] == {"ok": 1, "failed": 1}
    assert stats["statuses"]["session_open"] == {"ok": 1}
    assert stats["statuses"]["session_write"] == {"ok": 1}
    assert stats["statuses"]["session_close"] == {"ok": 1}
    assert sum(stats["statuses"]["session_read"].values()) == 1
    assert stats["recent"] == 6 and stats["latency_ms"]["p50"] is not None
