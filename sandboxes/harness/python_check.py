"""The tests' side of grading (the driver), run in a sandbox of its own.

The test source defines ``check(candidate)``; each top-level statement of its body
that contains an ``assert`` is one test, and the others are setup run in order.
Running the statements one by one (instead of calling ``check`` once) gives a
result per test id, so a grader can count tests instead of trusting an exit code.

``candidate`` is a proxy: each call is sent to the submission's process (see
``python_runner.py``) and its answer comes back as plain data. The submission never
shares an interpreter, a namespace or a descriptor with the tests, the expected
values or this driver's report channel.

Protocol: ``main(spec)`` gets ``{"results_fd", "request_fd", "reply_fd", "tests",
"prompt", "entry_point"}``. The ``results_fd`` pipe receives JSON lines
``{"event": "test", "id", "passed", "error"}``, ``{"event": "load_error"}`` and a final
``{"event": "done"}``; a test with no line is a failure to the host. With
``spec["verifier"] == "python-probe"`` the tests are a JSON list of argument tuples
(Python source) and each call's event carries ``"output"``: the repr of what it returned.

``spec["compiled"]`` (optional, ``{"tag", "code"}``): the same prompt, setup and test
statements already compiled by the host (:func:`compile_suite`, trusted task content,
never the submission), base64 of ``marshal``. Used when ``tag`` is this interpreter's
``sys.implementation.cache_tag`` (bytecode is only valid for the version that made it);
otherwise the source is parsed here. Saves each execution the parse and the compiles.
"""

import ast
import binascii
import builtins
import json
import marshal
import os
import sys

try:  # on the host (tests, id computation); in the sandbox plaindata's source is prepended
    from sandboxes.harness.plaindata import (
        decode,
        describe,
        driver_channels,
        dumps_line,
        encode,
        read_greeting,
    )
except ImportError:
    pass

MAX_ERROR_CHARS = 500
MAX_OUTPUT_CHARS = 4000
PROBE_CALL_TIMEOUT_S = 1.0
MAX_REPLY_BYTES = 16 * 1024 * 1024


def split_check(test_source, module=None):
    """Split the body of ``check`` into ``(test_id, statement)`` pairs.

    ``test_id`` is ``"assert_<k>"`` for the k-th statement that contains an
    ``assert`` and ``None`` for setup statements. ``module`` is the parsed source,
    when the caller has it already.

    Raises:
        SyntaxError: the test source does not parse.
        ValueError: the source defines no ``check`` function.
    """
    module = module or ast.parse(test_source)
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            pairs = []
            count = 0
            for stmt in node.body:
                if any(isinstance(sub, ast.Assert) for sub in ast.walk(stmt)):
                    pairs.append(("assert_%d" % count, stmt))
                    count += 1
                else:
                    pairs.append((None, stmt))
            return pairs
    raise ValueError("test source defines no check(candidate) function")


def compile_suite(test_source, prompt=""):
    """Compile a ``check(candidate)`` suite as :func:`main` runs it: ``(prompt code or None,
    setup code, ((test_id or None, statement code), ...))``, for ``spec["compiled"]``.

    A prompt that does not compile is None (the driver skips a prompt that fails).

    Raises:
        SyntaxError, ValueError: as :func:`split_check`, or a statement of ``check`` that
            cannot compile on its own (the driver then compiles it in place, and fails it).
    """
    module = ast.parse(test_source)
    pairs = tuple(
        (test_id, compile(ast.Module(body=[stmt], type_ignores=[]), "<tests>", "exec"))
        for test_id, stmt in split_check(test_source, module)
    )
    try:
        prompt_code = compile(prompt, "<prompt>", "exec")
    except (SyntaxError, ValueError):
        prompt_code = None
    return prompt_code, compile(module_without_check(module), "<tests>", "exec"), pairs


def _load_compiled(compiled):
    """The host's compiled suite, or None when it was made by another interpreter version."""
    if not compiled or compiled.get("tag") != sys.implementation.cache_tag:
        return None
    return marshal.loads(binascii.a2b_base64(compiled["code"]))


def module_without_check(module):
    """The parsed test module's top level (imports, constants, helpers) minus ``check``."""
    return ast.Module(
        body=[n for n in module.body if not (isinstance(n, ast.FunctionDef) and n.name == "check")],
        type_ignores=[],
    )


class SubmissionLost(RuntimeError):
    """The submission's process is gone (it exited, crashed or was killed)."""


class Candidate:
    """Calls the submission's function in its own process; answers are plain data."""

    def __init__(self, name, requests, replies, call_timeout_s=None):
        self.name, self.requests, self.replies = name, requests, replies
        # A suite's per-test limit, or a probe's: the slow call fails, the next test runs.
        self.call_timeout_s = call_timeout_s
        self.lost = None

    def __call__(self, *args, **kwargs):
        if self.lost:
            raise SubmissionLost(self.lost)
        try:
            call = {"name": self.name, "args": encode(list(args)), "kwargs": encode(kwargs)}
            if self.call_timeout_s:
                call["timeout_s"] = self.call_timeout_s
            self.requests.write(dumps_line(call))
            self.requests.flush()
        except OSError:
            self.lost = "the submission's process exited"
            raise SubmissionLost(self.lost) from None
        line = self.replies.readline(MAX_REPLY_BYTES)
        if not line.endswith(b"\n"):
            self.lost = (
                "the submission's process exited or sent a reply over %d bytes" % MAX_REPLY_BYTES
            )
            raise SubmissionLost(self.lost)
        reply = json.loads(line)
        if "ok" in reply:
            return decode(reply["ok"])
        error = reply.get("error") or {}
        kind = getattr(builtins, str(error.get("type")), None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind = RuntimeError
        raise kind("%s (raised by the program under test)" % error.get("message", ""))


def main(spec):
    emit, requests, replies = driver_channels(spec)
    probing = spec.get("verifier") == "python-probe"
    compiled = None if probing else _load_compiled(spec.get("compiled"))
    if compiled is not None:
        prompt_code, setup_code, pairs = compiled
    else:
        if probing:
            # A probe calls the program on each input and reports what it returned (the
            # reference as the oracle of generated tests); each call is one "test".
            module = ast.Module(body=[], type_ignores=[])
            pairs = [
                ("call_%d" % k, ast.parse("__probe_value__ = candidate(*%s)" % args).body[0])
                for k, args in enumerate(json.loads(spec["tests"]))
            ]
        else:
            module = ast.parse(spec["tests"])
            pairs = split_check(spec["tests"], module)
        prompt_code = setup_code = None
    namespace = {"__name__": "__main__"}
    load_error = None
    hello = read_greeting(replies, MAX_REPLY_BYTES)
    if hello.get("lost"):
        emit(event="submission_lost", error=hello["load_error"])
    if "load_error" in hello:
        load_error = str(hello["load_error"])[:MAX_ERROR_CHARS]
        emit(event="load_error", error=load_error)
    else:
        try:
            # The prompt is task content: it may define helpers the tests call
            # (HumanEval/32's ``poly``). Its stub of the entry point is replaced below.
            if compiled is None:
                prompt_code = compile(spec.get("prompt", ""), "<prompt>", "exec")
            if prompt_code is not None:
                exec(prompt_code, namespace)
        except Exception:  # noqa: BLE001 - a prompt that is not a whole program defines nothing
            pass
        exec(setup_code or compile(module_without_check(module), "<tests>", "exec"), namespace)
        # Tests may name the entry point itself (HumanEval/33 compares the candidate
        # with ``sort_third``): in the original harness that name is the submission's
        # function, so here it is the same proxy as ``candidate``.
        namespace["candidate"] = namespace[spec["entry_point"]] = Candidate(
            spec["entry_point"],
            requests,
            replies,
            PROBE_CALL_TIMEOUT_S if probing else spec.get("test_timeout_s"),
        )

    for test_id, stmt in pairs:
        if load_error is not None:
            if test_id is not None:
                emit(event="test", id=test_id, passed=False, error="not run: " + load_error)
            continue
        try:
            if compiled is None:
                stmt = compile(ast.Module(body=[stmt], type_ignores=[]), "<tests>", "exec")
            exec(stmt, namespace)
        except BaseException as exc:  # noqa: BLE001 - any failure of a statement fails its test
            if test_id is not None:
                emit(event="test", id=test_id, passed=False, error=describe(exc, MAX_ERROR_CHARS))
            continue
        if probing:
            emit(
                event="test",
                id=test_id,
                passed=True,
                error="",
                output=repr(namespace.pop("__probe_value__"))[:MAX_OUTPUT_CHARS],
            )
        elif test_id is not None:
            emit(event="test", id=test_id, passed=True, error="")
    lost = namespace.get("candidate").lost if "candidate" in namespace else None
    if lost:
        emit(event="submission_lost", error=lost)
    emit(event="done")
    try:  # the submission's process reads EOF now, not when this one is gone: both exit side by side
        requests.close()
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
