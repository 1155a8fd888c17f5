"""The submission's side of grading, run inside its own sandbox.

It loads the submission, then answers call requests from the test driver (which runs
in a *separate* sandbox, out of the submission's reach): ``{"name", "args", "kwargs"}``
in, ``{"ok": <plain data>}`` or ``{"error": {"type", "message"}}`` out, one JSON line
each way. Whatever the submission does in this process (exit, patch builtins, fake
``__eq__``, write to any descriptor), the tests only ever see plain data.

Protocol: ``main(spec)`` gets ``{"solution_path", "request_fd", "reply_fd"}``; the first
reply is ``{"ready": true}`` or ``{"load_error": "..."}``. EOF on requests ends it.
"""

import json
import os
import sys

try:  # on the host (tests); in the sandbox plaindata's source is prepended to this file
    from sandboxes.harness.plaindata import decode, dumps_line, encode
except ImportError:
    pass


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
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import time is a load error
        reply({"load_error": "%s: %s" % (type(exc).__name__, str(exc)[:500])})
        os._exit(0)
    reply({"ready": True})
    for line in requests:
        try:
            request = json.loads(line)
            function = namespace[request["name"]]
            args = decode(request["args"])
            kwargs = decode(request["kwargs"])
            result = {"ok": encode(function(*args, **kwargs))}
        except BaseException as exc:  # noqa: BLE001 - SystemExit/SkipTest in a call fail that call
            result = {"error": _describe(exc)}
        reply(result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
