"""The calls of a repository grading's differential check, inside a fresh sandbox session (part
of a program: ``grading_trust.py``, ``grading_guard.py``, ``plaindata.py`` and this file, started
by ``pytest_supervisor.py`` as the pytest runner is).

The workspace holds one side's files (the submission's, the task's or the reference's), never a
test. :func:`main` imports each named module from the workspace and calls the named function on
arguments rebuilt from plain data, ``repeat`` times each, and answers on the report pipe, one
outcome per run: ``["ok", <plain data>]``, ``["not_plain", type name]`` (a value that cannot
cross: a subclass of a builtin, an object that fakes equality...), ``["raised", [the
exception's class names, most derived first]]``, ``["timeout"]`` or ``["import_error",
message]``. Only plain data crosses; the host compares the sides.

The first line's audit hook guards this process too (the submission's changed files are
untrusted), so finding the token that signs the answer takes what it refuses.
"""

import importlib
import json
import os
import secrets
import signal
import sys

try:  # on the host (tests); in the sandbox the parts' source comes first
    from sandboxes.harness.grading_guard import Guard
    from sandboxes.harness.grading_trust import (
        REPORT_FD,
        WORKSPACE,
        Trust,
        _ascii,
        _exit,
        _get_ident,
        _nondumpable,
        _report,
        _type,
        first_site_index,
    )
    from sandboxes.harness.plaindata import Codec, NotPlainData
except ImportError:
    pass

MESSAGE_CHARS = 300


class CallTimeout(BaseException):
    """A call ran past its time (a BaseException: ``except Exception`` does not swallow it)."""


def _on_alarm(signum, frame):
    raise CallTimeout


def _outcome(call, timeout_s):
    """One run of one call (see the module)."""
    try:
        module = importlib.import_module(call["module"])
        function = getattr(module, call["function"])
    except BaseException as exc:  # noqa: BLE001 - whatever the import raised
        return ["import_error", f"{_type(exc).__name__}: {exc}"[:MESSAGE_CHARS]]
    codec = Codec()
    args = codec.decode(call["args"])
    kwargs = codec.decode(call["kwargs"])
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        value = function(*args, **kwargs)
    except CallTimeout:
        return ["timeout"]
    except BaseException as exc:  # noqa: BLE001 - the call's own exception is its outcome
        return ["raised", [k.__name__ for k in _type(exc).__mro__][:8]]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        return ["ok", Codec().encode(value)]
    except NotPlainData:
        return ["not_plain", getattr(_type(value), "__qualname__", "?")[:MESSAGE_CHARS]]
    except BaseException as exc:  # noqa: BLE001 - a hostile value that breaks the encoder
        return ["not_plain", f"{_type(value).__name__} ({_type(exc).__name__})"]


def main(raw, report_fd=REPORT_FD, source=b""):
    """Run the calls ``raw`` (the JSON configuration: ``calls``, ``repeat``, ``timeout_s``,
    ``roots``, ``unchanged``) names; answer on the report pipe; exit."""
    config = json.loads(raw)
    token = secrets.token_hex(16)
    os.set_inheritable(report_fd, False)
    _report(report_fd, "H " + token)
    _nondumpable()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    answer = {"ran": False}
    try:
        signal.signal(signal.SIGALRM, _on_alarm)
        trust = Trust((), config.get("unchanged", ()), _get_ident(), config.get("changed_lines"))
        guard = Guard(trust, (), {}, guards=True)
        sys.addaudithook(guard)
        if config.get("site") and os.path.isdir(config["site"]):
            sys.path.insert(first_site_index(), config["site"])
        os.chdir(WORKSPACE)
        # As the runner places it: after the standard library and the environment.
        at = first_site_index(after=config.get("site", ""))
        for root in reversed(config.get("roots", [""])):
            sys.path.insert(at, os.path.join(WORKSPACE, root) if root else WORKSPACE)
        guard.active = True
        timeout_s = float(config.get("timeout_s", 5.0))
        results = []
        for call in config["calls"]:
            results.append([_outcome(call, timeout_s) for _ in range(int(config["repeat"]))])
        answer = {"ran": True, "results": results, "refused": guard.refused[:10]}
    except BaseException as exc:  # noqa: BLE001 - the harness reports, never crashes
        answer["error"] = f"{_type(exc).__name__}: {exc}"[:2000]
    _report(report_fd, "A " + token + " " + _ascii(answer))
    _exit(0)
