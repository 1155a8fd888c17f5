"""The submission's side of grading, run inside its own sandbox.

It loads the submission, then answers call requests from the test driver (which runs
in a *separate* sandbox, out of the submission's reach): ``{"name", "args", "kwargs"}``
in, ``{"ok": <plain data>}`` or ``{"error": {"type", "message"}}`` out, one JSON line
each way. Whatever the submission does in this process (exit, patch builtins, fake
``__eq__``, write to any descriptor), the tests only ever see plain data.

Protocol: ``main(spec)`` gets ``{"solution_path", "request_fd", "reply_fd"}``; the first
reply is ``{"ready": true}`` or ``{"load_error": "..."}``. EOF on requests ends it.
A call may carry ``"timeout_s"`` (probes of a reference): past it the call raises
``CallTimeout``. ``{"read_files": [path, ...]}`` asks for files the program wrote in its workspace
(output-comparing verifiers): ``{"ok": {path: text or None}}``; what comes back is
only ever data the verifier compares, never code it runs.
"""

import json
import os
import signal
import sys

try:  # on the host (tests); in the sandbox plaindata's source is prepended to this file
    from sandboxes.harness.plaindata import decode, dumps_line, encode
except ImportError:
    pass


MAX_FILE_CHARS = 4 * 1024 * 1024


def _read_files(paths):
    found = {}
    for path in paths:
        try:
            with open(str(path), encoding="utf-8", errors="replace") as handle:
                found[path] = handle.read(MAX_FILE_CHARS)
        except (OSError, ValueError):
            found[path] = None
    return found


class CallTimeout(Exception):
    """A call that asked for a time limit (a probe of the reference) ran past it."""


def _on_alarm(signum, frame):
    raise CallTimeout("the call ran past its time limit")


def _call(function, args, kwargs, timeout_s):
    if not timeout_s:
        return function(*args, **kwargs)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))
    try:
        return function(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _describe(exc):
    return {"type": type(exc).__name__, "message": str(exc)[:500]}


def main(spec):
    requests = os.fdopen(spec["request_fd"], "rb")
    reply_fd = spec["reply_fd"]

    def reply(message):
        data = dumps_line(message)
        while data:
            data = data[os.write(reply_fd, data):]

    namespace = {"__name__": "__main__"}
    try:
        with open(spec["solution_path"], encoding="utf-8") as handle:
            source = handle.read()
        exec(compile(source, spec["solution_path"], "exec"), namespace)
    except SystemExit as exc:
        # A script (output-based verifiers: spec "script") may end with exit(0); for
        # unit tests any exit while loading is a load error, so no test can run.
        if not (spec.get("script") and exc.code in (None, 0)):
            reply({"load_error": "SystemExit: %s" % str(exc)[:500]})
            os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - any other failure to load is a load error
        reply({"load_error": "%s: %s" % (type(exc).__name__, str(exc)[:500])})
        os._exit(0)
    reply({"ready": True})
    for line in requests:
        try:
            request = json.loads(line)
            if "read_files" in request:
                reply({"ok": encode(_read_files(list(request["read_files"])))})
                continue
            function = namespace[request["name"]]
            args = decode(request["args"])
            kwargs = decode(request["kwargs"])
            result = {"ok": encode(_call(function, args, kwargs, request.get("timeout_s")))}
        except BaseException as exc:  # noqa: BLE001 - SystemExit/SkipTest in a call fail that call
            result = {"error": _describe(exc)}
        reply(result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
