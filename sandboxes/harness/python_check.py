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

``spec["setup"]`` (optional): the suite's setup code (trusted task content, such as MBPP's
``test_setup_code`` and the names its tests use from the reference module), run here after
the prompt and before the test module's top level. Classes that the prompt, the setup or
the test module define at module level are the task's *trusted* classes: their instances
cross the boundary as state and are rebuilt with the trusted class (see ``plaindata.py``).
A name the tests use that none of them binds (nor the builtins) is, as in MBPP's and
HumanEval's own harnesses where tests run in the program's namespace, the program's:
``spec["program_names"]`` (the host's :func:`program_names`) lists the candidates, and each
one still unbound after the setup is a proxy that calls the program's function of that name.

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
import sys

try:  # on the host (tests, id computation); in the sandbox plaindata's source is prepended
    from sandboxes.harness.plaindata import (
        Codec,
        describe,
        driver_channels,
        driver_done,
        dumps_line,
        read_greeting,
        trusted_classes,
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
                    pairs.append((f"assert_{count}", stmt))
                    count += 1
                else:
                    pairs.append((None, stmt))
            return pairs
    raise ValueError("test source defines no check(candidate) function")


def compile_suite(test_source, prompt="", setup=""):
    """Compile a ``check(candidate)`` suite as :func:`main` runs it: ``(prompt code or None,
    setup code, ((test_id or None, statement code), ...))``, for ``spec["compiled"]``. The
    setup code is the suite's ``setup`` followed by the test module's top level.

    A prompt that does not compile is None (the driver skips a prompt that fails).

    Raises:
        SyntaxError, ValueError: as :func:`split_check`, setup code that does not parse, or
            a statement of ``check`` that cannot compile on its own (the driver then
            compiles it in place, and fails it).
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
    return prompt_code, compile(setup_module(module, setup), "<tests>", "exec"), pairs


def setup_module(module, setup=""):
    """What runs before the tests: the suite's ``setup`` source, then the parsed test
    module's top level (imports, constants, helpers) minus ``check``.

    Raises:
        SyntaxError: ``setup`` does not parse.
    """
    top = module_without_check(module)
    if setup:
        top.body[:0] = ast.parse(setup, "<setup>").body
    return top


def program_names(test_source, setup=""):
    """The names the tests load as globals but never bind themselves (``sorted``): those
    that the prompt, the setup or the builtins do not bind either are the program's (the
    driver binds a proxy to each). Computed by the host, once per suite.

    Raises:
        SyntaxError, ValueError: as :func:`compile_suite`.
    """
    import dis  # noqa: PLC0415 - the host's, once per suite (cached there)

    module = ast.parse(test_source)
    codes = [compile(setup_module(module, setup), "<tests>", "exec")]
    codes += [_statement_code(stmt) for _id, stmt in split_check(test_source, module)]
    loaded, bound = set(), set()
    todo = [code for code in codes if not isinstance(code, Exception)]
    while todo:
        code = todo.pop()
        for op in dis.get_instructions(code):
            if op.opname in ("LOAD_NAME", "LOAD_GLOBAL"):
                loaded.add(op.argval)
            elif op.opname in ("STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL"):
                bound.add(op.argval)
        todo.extend(const for const in code.co_consts if isinstance(const, type(code)))
    return sorted(name for name in loaded - bound if not name.startswith("__"))


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


class Channel:
    """The pipes to the submission's process, shared by every proxy of one execution.

    ``codec`` (a :class:`Codec` holding the tests' trusted classes) encodes arguments and
    rebuilds answers; ``lost`` says why the process is gone, once it is.
    """

    def __init__(self, requests, replies, codec, call_timeout_s=None):
        self.requests, self.replies, self.codec = requests, replies, codec
        # A suite's per-test limit, or a probe's: the slow call fails, the next test runs.
        self.call_timeout_s = call_timeout_s
        self.lost = None


class Candidate:
    """Calls the submission's function ``name`` in its own process; answers are plain data."""

    def __init__(self, name, channel):
        self.name, self.channel = name, channel

    def __call__(self, *args, **kwargs):
        channel = self.channel
        if channel.lost:
            raise SubmissionLost(channel.lost)
        call = {
            "name": self.name,
            "args": channel.codec.encode(list(args)),
            "kwargs": channel.codec.encode(kwargs),
        }
        if channel.call_timeout_s:
            call["timeout_s"] = channel.call_timeout_s
        try:
            channel.requests.write(dumps_line(call))
            channel.requests.flush()
        except OSError:
            channel.lost = "the submission's process exited"
            raise SubmissionLost(channel.lost) from None
        line = channel.replies.readline(MAX_REPLY_BYTES)
        if not line.endswith(b"\n"):
            channel.lost = (
                f"the submission's process exited or sent a reply over {MAX_REPLY_BYTES} bytes"
            )
            raise SubmissionLost(channel.lost)
        reply = json.loads(line)
        if "ok" in reply:
            return channel.codec.decode(reply["ok"])
        error = reply.get("error") or {}
        kind = getattr(builtins, str(error.get("type")), None)
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            kind = RuntimeError
        raise kind(f"{error.get('message', '')} (raised by the program under test)")


def _statement_code(stmt):
    """A test statement's code, or the exception compiling it raised (its test fails)."""
    try:
        return compile(ast.Module(body=[stmt], type_ignores=[]), "<tests>", "exec")
    except Exception as exc:  # noqa: BLE001 - a statement that cannot compile fails its test
        return exc


def main(spec):
    emit, requests, replies = driver_channels(spec)
    probing = spec.get("verifier") == "python-probe"
    compiled = None if probing else _load_compiled(spec.get("compiled"))
    setup_error = None
    if compiled is not None:
        prompt_code, setup_code, pairs = compiled
    else:
        if probing:
            # A probe calls the program on each input and reports what it returned (the
            # reference as the oracle of generated tests); each call is one "test".
            module = ast.Module(body=[], type_ignores=[])
            pairs = [
                (f"call_{k}", ast.parse(f"__probe_value__ = candidate(*{args})").body[0])
                for k, args in enumerate(json.loads(spec["tests"]))
            ]
        else:
            module = ast.parse(spec["tests"])
            pairs = split_check(spec["tests"], module)
        pairs = [(test_id, _statement_code(stmt)) for test_id, stmt in pairs]
        prompt_code = None
        try:
            setup_code = compile(setup_module(module, spec.get("setup") or ""), "<tests>", "exec")
        except SyntaxError as exc:
            setup_code, setup_error = None, f"the suite's setup code does not parse: {exc}"
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
        try:
            if setup_error is None:
                exec(setup_code, namespace)
        except Exception as exc:  # noqa: BLE001 - a setup that fails fails every test
            setup_error = "the tests' setup failed: " + describe(exc, MAX_ERROR_CHARS)
        if setup_error is not None:
            load_error = setup_error[:MAX_ERROR_CHARS]
            emit(event="load_error", error=load_error)
        entry = spec["entry_point"]
        channel = Channel(
            requests,
            replies,
            Codec(trusted_classes(namespace, exclude=(entry, "candidate"))),
            PROBE_CALL_TIMEOUT_S if probing else spec.get("test_timeout_s"),
        )
        # Tests may name the entry point itself (HumanEval/33 compares the candidate
        # with ``sort_third``, MBPP's asserts only ever do): in the original harness that
        # name is the submission's function, so here it is the same proxy as ``candidate``.
        namespace["candidate"] = namespace[entry] = Candidate(entry, channel)
        for name in spec.get("program_names") or ():
            if name not in namespace and not hasattr(builtins, name):
                namespace[name] = Candidate(name, channel)

    for test_id, stmt in pairs:
        if load_error is not None:
            if test_id is not None:
                emit(event="test", id=test_id, passed=False, error="not run: " + load_error)
            continue
        try:
            if isinstance(stmt, Exception):
                raise stmt
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
    candidate = namespace.get("candidate")
    lost = candidate.channel.lost if isinstance(candidate, Candidate) else None
    if lost:
        emit(event="submission_lost", error=lost)
    driver_done(emit, requests)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
