"""``benchmarks/sandbox_sessions.py --quick`` runs end to end and prints the figures it promises
(so the benchmark cannot rot); the figures themselves are the benchmark's business, not a test's."""

from __future__ import annotations

import json
import subprocess
import sys

from django.conf import settings


def test_the_sessions_benchmark_runs_and_reports_every_figure():
    done = subprocess.run(
        [sys.executable, "benchmarks/sandbox_sessions.py", "--quick"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["mode"] == "quick"
    ours = report["sessions"]
    for key in ("open_one_file", "open_repository"):
        assert ours[key]["open_ms"]["p50"] > 0 and ours[key]["first_open_ms"] > 0
    for key in ("exec_true", "exec_python", "suite"):
        for way in ("interleaved", "back_to_back"):
            assert ours[key][way]["ms"]["p50"] > 0 and ours[key][way]["worker_host_ms"]["p50"] > 0
    assert ours["suite"]["tests"] == 100
    assert ours["idle"]["answering"] == ours["idle"]["sessions"] > 0
    assert ours["idle"]["pss_per_session_bytes"] > 0
    for peer in ("bwrap", "unshare"):
        if "unavailable" in report[peer]:
            continue
        assert report[peer]["exec_true"]["interleaved"]["p50"] > 0
        assert report[peer]["open_copy_ms"]["repository"]["p50"] > 0
        assert set(report["ratios"][peer]) >= {
            "true_interleaved",
            "true_back_to_back",
            "python_interleaved",
            "suite_interleaved",
            "open_one_file",
            "open_repository",
        }
    assert set(report["targets"]) == {
        "open_one_file_p50_ms",
        "open_repository_p50_ms",
        "exec_true_p50_ms",
        "exec_true_interleaved_p50_ms",
        "per_call_speedup_over_bwrap_interleaved",
        "per_call_speedup_over_bwrap_back_to_back",
        "idle_sessions_total_bytes",
    }
    assert all({"target", "measured", "met"} <= set(t) for t in report["targets"].values())
