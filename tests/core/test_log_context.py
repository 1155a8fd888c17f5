"""Structured logs: CRUCIBLE_LOG_FORMAT=json|plain switches the formatter of settings.LOGGING, and a
record carries run_id, step, trajectory_id and request_id inside their context and not outside it.
The format is read at start-up, so each case runs in a fresh process with the real settings."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.logcontext import ContextFilter, log_context, log_context_bind

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, os, threading, django
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
django.setup()
from core.logcontext import log_context, log_context_process
log = logging.getLogger("crucible.test")
log.warning("before")
with log_context(run_id=7, step=3):
    with log_context(trajectory_id=11):
        log.warning("inside %s", "both")
    log.warning("inside the run only")
log.warning("after")
log_context_process(run_id=8)
thread = threading.Thread(target=lambda: log.warning("from a thread"))
thread.start(); thread.join()
try:
    1 / 0
except ZeroDivisionError:
    with log_context(request_id="batch:0"):
        log.exception("failed")
"""


def run_logging(log_format: str) -> list[str]:
    env = {**os.environ, "CRUCIBLE_LOG_FORMAT": log_format}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [line for line in done.stderr.splitlines() if line.strip()]


def test_json_records_carry_the_context_inside_it_and_not_outside():
    records = [json.loads(line) for line in run_logging("json") if line.startswith("{")]
    by_message = {record["message"]: record for record in records}
    assert set(by_message) == {
        "before",
        "inside both",
        "inside the run only",
        "after",
        "from a thread",
        "failed",
    }
    inside = by_message["inside both"]
    assert (inside["run_id"], inside["step"], inside["trajectory_id"]) == (7, 3, 11)
    assert (inside["level"], inside["logger"]) == ("WARNING", "crucible.test")
    assert inside["time"].endswith("+00:00")  # ISO 8601, UTC
    assert "trajectory_id" not in by_message["inside the run only"]
    assert by_message["inside the run only"]["step"] == 3
    for outside in ("before", "after"):
        assert not {"run_id", "step", "trajectory_id", "request_id"} & set(by_message[outside])
    assert by_message["from a thread"]["run_id"] == 8  # the process's context reaches every thread
    failed = by_message["failed"]
    assert failed["request_id"] == "batch:0" and failed["run_id"] == 8
    assert "ZeroDivisionError" in failed["exc_info"]  # the traceback stays inside the one JSON line


def test_plain_records_append_the_context():
    lines = run_logging("plain")
    assert any(
        line.endswith("WARNING crucible.test: inside both [run_id=7 step=3 trajectory_id=11]")
        for line in lines
    )
    assert any(line.endswith("WARNING crucible.test: before") for line in lines)
    failed = next(line for line in lines if "failed" in line)
    assert failed.endswith("failed [run_id=8 request_id=batch:0]")  # before the traceback's lines
    assert not any(line.startswith("{") for line in lines)


def test_a_bad_log_format_stops_start_up_with_a_message():
    env = {**os.environ, "CRUCIBLE_LOG_FORMAT": "xml"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "CRUCIBLE_LOG_FORMAT='xml' is not a log format; use plain or json" in done.stderr
    assert "Traceback" not in done.stderr


def _record() -> logging.LogRecord:
    record = logging.LogRecord("t", logging.WARNING, __file__, 1, "m", (), None)
    ContextFilter().filter(record)
    return record


def test_each_thread_has_its_own_context():
    seen: dict = {}

    def other() -> None:
        seen["other"] = getattr(_record(), "run_id", None)

    with log_context(run_id=1):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert _record().run_id == 1
    assert seen == {"other": None}
    assert not hasattr(_record(), "run_id")


def test_a_binding_ends_with_its_enclosing_context_and_extra_wins():
    with log_context():
        log_context_bind(request_id="r-1")
        assert _record().request_id == "r-1"
        record = logging.LogRecord("t", logging.WARNING, __file__, 1, "m", (), None)
        record.request_id = "given"
        ContextFilter().filter(record)
        assert record.request_id == "given"
    assert not hasattr(_record(), "request_id")


def test_an_unknown_field_is_refused():
    with pytest.raises(TypeError, match="run_idd"), log_context(run_idd=1):
        pass
