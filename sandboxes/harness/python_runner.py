"""The submission's side of grading, run inside its own sandbox.

It loads the submission, then answers call requests from the test driver (which runs
in a *separate* sandbox, out of the submission's reach): ``{"name", "args", "kwargs"}``
in, ``{"ok": <plain data>}`` or ``{"error": {"type", "message"}}`` out, one JSON line
each way. Whatever the submission does in this process (exit, patch builtins, fake
``__eq__``, write to any descriptor), the tests only ever see plain data.

Protocol: ``main(spec)`` gets ``{"solution_path", "request_fd", "reply_fd"}``; the first
reply is ``{"ready": true}`` or ``{"load_error": "..."}``. EOF on requests ends it.

``spec["trusted"]`` (optional): the module-level imports and class definitions of the task's
trusted content (the prompt and the suite's setup code; never a test), run in the program's
namespace before it loads, as MBPP's harness runs its setup code. The classes they define
are the trusted classes whose instances cross as state (see ``plaindata.py``): arguments of
those classes are rebuilt with them, and the program's instances of them cross back. A class
statement of the program that is the trusted definition verbatim (the prompt's own class,
repeated by prompt + completion) is skipped, so the name keeps the trusted class; any other
class the program defines, whatever its name, is its own and does not cross.
``spec["entry_point"]`` is never a trusted class (the program must define it).

``spec["stdio"]``: the program is a script fed on standard input (the ``stdio`` verifier, see
``python_stdio.py``). It is compiled once; then each request ``{"stdin": text, "timeout_s"}``
runs it afresh in a child process (``fork``: a fresh ``__main__``, fd 0 reading that text, fd
1 and 2 captured), killed past ``timeout_s`` of wall time or past :data:`MAX_STDOUT_BYTES`
of output, and answered ``{"ok": {"stdout", "stderr", "exit", "signal", "timed_out",
"output_exceeded"}}``. The expected outputs never come here: only one case's input at a time.
A call may carry ``"timeout_s"`` (probes of a reference): past it the call raises
``CallTimeout``. ``{"read_files": [path, ...]}`` asks for files the program wrote in its workspace
(output-comparing verifiers): ``{"ok": {path: text or None}}``; what comes back is
only ever data the verifier compares, never code it runs.

Audit (``spec["audit_fd"]``, ``spec["audit_token"]``): before the submission's code runs,
an audit hook (PEP 578, ``sys.addaudithook``) records its attempts at network, processes,
native code, writes outside the sandbox's scratch space (``/tmp``, which holds the workspace,
and ``/dev/shm``), signals, tampering and introspection (see :data:`AUDITED`). Each event is
one JSON line ``{"t": token, "e": event, "a": short argument repr}`` written to the audit
pipe *as it happens* (one ``os.write`` under ``PIPE_BUF``, so a later crash, ``os._exit`` or
SIGKILL loses nothing already recorded); past :data:`AUDIT_MAX_EVENTS` only the count goes
on, sent at each power of two, so a flood cannot grow the report. The harness's own end
writes ``{"t": token, "end": count, "call_ms": CPU milliseconds spent inside the tests'
calls}``. CPython offers no way to remove an audit hook, so the submission cannot switch it
off; the token lives only in the hook's closure (reaching it takes ``gc`` or ``ctypes``,
themselves audited), so lines the submission writes to the pipe itself are told apart, and a
channel closed or redirected by it loses the end line, which the host reads as tampering. The
recording is a witness for the reward, not a boundary: the sandbox's namespaces, seccomp
filter and read-only root are what stop these actions.
"""

import _thread
import json
import os
import posixpath
import select
import signal
import sys
import time

try:  # on the host (tests); in the sandbox plaindata's source is prepended to this file
    from sandboxes.harness.plaindata import Codec, dumps_line, encode, trusted_classes
except ImportError:
    pass


MAX_FILE_CHARS = 4 * 1024 * 1024
MAX_STDOUT_BYTES = 8 * 1024 * 1024  # one stdio case's output; more kills the case
STDERR_TAIL_BYTES = 2000
# Events a stdio program is expected to raise (reading its input), not recorded for it.
STDIO_IGNORED = frozenset(("builtins.input",))
AUDIT_MAX_EVENTS = 64
AUDIT_MAX_ARG_CHARS = 160
AUDIT_END = "crucible.audit_end"
# Runtime events recorded, by CPython audit event name (docs.python.org: "Audit events table").
# ``open`` and the path events are recorded only for a write outside the scratch space;
# ``object.__getattr__`` only for attributes that reach another frame; ``sys._getframe`` only
# when it returns one of the harness's frames. Not recorded on purpose: ``exec``/``compile``
# (namedtuple and dataclasses use them), ``import``, reads, ``sys.setrecursionlimit``
# (a resource matter the rlimits hold).
AUDITED = frozenset(
    (
        # network
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sendto",
        "socket.sendmsg",
        "http.client.connect",
        "urllib.Request",
        "ftplib.connect",
        "smtplib.connect",
        "poplib.connect",
        "imaplib.open",
        "nntplib.connect",
        "telnetlib.Telnet.open",
        "webbrowser.open",
        # processes
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
        "os.startfile",
        # native code
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.call_function",
        "ctypes.PyObj_FromPtr",
        # filesystem (writes outside the scratch space)
        "open",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.move",
        "shutil.copyfile",
        # signals
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        # tampering
        "sys.addaudithook",
        "resource.setrlimit",
        "resource.prlimit",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        AUDIT_END,
        # introspection: reaching frames and objects outside the submission
        "object.__getattr__",
        "sys._getframe",
        "sys._current_frames",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        # other
        "code.__new__",
        "builtins.input",
        "os.putenv",
        "os.unsetenv",
    )
)
# Path events: the positions of the paths they create, change or remove.
PATH_ARGS = {
    "open": (0,),
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
    "shutil.copyfile": (1,),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
SCRATCH_DIRS = ("/tmp", "/dev/shm")
SCRATCH_FILES = frozenset(
    (
        "/dev/null",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/fd/1",
        "/dev/fd/2",
        "/proc/self/fd/1",
        "/proc/self/fd/2",
    )
)
FRAME_ATTRIBUTES = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
HARNESS_FILES = frozenset(("<python_runner>", "<plaindata>", "<string>"))
_audit = (
    sys.audit
)  # bound at load: a submission that replaces sys.audit cannot swallow the end line
# The calls' CPU time: the calling thread's clock (the process-wide one only advances at
# scheduler ticks while RLIMIT_CPU arms its timer: 4 ms steps). Bound at load, like _audit.
_thread_time = time.thread_time
PLAIN_TYPES = (str, bytes, int, float, bool, type(None))


def _short(value, depth=0):
    """A short repr that never runs the submission's code: exact builtin types only."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        text = repr(value)
    elif kind in (tuple, list) and depth < 2:
        items = [_short(item, depth + 1) for item in value[:6]]
        inside = ", ".join(items) + (
            ", ..." if len(value) > 6 else "," if kind is tuple and len(value) == 1 else ""
        )
        text = ("(%s)" if kind is tuple else "[%s]") % inside
    else:
        text = f"<{kind.__name__!s}>"
    return text[:AUDIT_MAX_ARG_CHARS]


def _outside_scratch(path):
    """True unless ``path`` (a str or bytes path) names the scratch space; any other kind of
    path (a descriptor, an object) counts as outside: it cannot be checked without its code."""
    if type(path) is bytes:
        path = path.decode("utf-8", "surrogateescape")
    if type(path) is not str:
        return True
    absolute = posixpath.normpath(posixpath.join(os.getcwd(), path))
    if absolute in SCRATCH_FILES:
        return False
    real = posixpath.realpath(absolute)
    return not any(real == root or real.startswith(root + "/") for root in SCRATCH_DIRS)


def _judge(event, args):
    """The recorded form of ``(event, args)``, or None when it is not worth recording."""
    if event == "open":
        flags = args[2] if len(args) > 2 and type(args[2]) is int else 0
        if not flags & WRITE_FLAGS or not _outside_scratch(args[0]):
            return None
    elif event in PATH_ARGS:
        if not any(_outside_scratch(args[i]) for i in PATH_ARGS[event] if i < len(args)):
            return None
    elif event == "object.__getattr__":
        if len(args) < 2 or args[1] not in FRAME_ATTRIBUTES:
            return None
        return f"{type(args[0]).__name__!s}.{args[1]!s}"
    elif event == "sys._getframe":
        frame = args[0] if args else None
        if frame is None or frame.f_code.co_filename not in HARNESS_FILES:
            return None
        return f"harness frame {frame.f_code.co_name}"
    elif event == AUDIT_END:  # the harness's own end is handled by the hook
        return "raised by the submission"
    return _short(tuple(args))


def _audit_install(fd, token, end_caller, ignored=frozenset()):
    """Record the audited events of this process (and of its forks) on ``fd`` from now on,
    but the ``ignored`` ones (``builtins.input`` for a program whose job is to read stdin).

    Nothing that refers to ``token`` is returned or kept outside the hook's closure.
    """
    count = [0]
    busy = set()
    get_ident = _thread.get_ident
    getframe = sys._getframe

    def emit(message):
        message["t"] = token
        data = (json.dumps(message) + "\n").encode()
        try:
            os.write(fd, data)  # one write under PIPE_BUF: whole, even among forks
        except OSError:
            pass  # the channel is gone (closed by the submission): the host sees no end line

    def hook(event, args):
        if event not in AUDITED or event in ignored:
            return
        ident = get_ident()
        if ident in busy:  # an event raised by this hook itself
            return
        busy.add(ident)
        try:
            if event == AUDIT_END and getframe(1).f_code is end_caller:
                emit({"end": count[0], "call_ms": args[0] if args else None})
                return
            detail = _judge(event, args)
            if detail is None:
                return
            count[0] += 1
            number = count[0]
            if number <= AUDIT_MAX_EVENTS:
                emit({"e": event, "a": detail})
            elif number & (number - 1) == 0:  # past the cap: the count, at powers of two
                emit({"n": number})
        except CallTimeout:
            raise  # a call's time limit fired inside the hook: it still ends that call
        except Exception:  # noqa: BLE001 - recording must never change what the program does
            pass
        finally:
            busy.discard(ident)

    sys.addaudithook(hook)


def _read_text(path):
    """A UTF-8 file's text, read without the text layer (a fresh process pays ~0.15 ms for
    its first ``open()``); newlines are left to ``compile``, which reads them as a file would.

    Raises:
        OSError, UnicodeDecodeError: the file cannot be read as UTF-8 (a load error).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks).decode("utf-8")
            chunks.append(chunk)
    finally:
        os.close(fd)


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


def _trusted_definitions(source, namespace, entry_point):
    """Run the trusted imports and class statements of ``source`` in ``namespace`` (each on
    its own; one that fails is left out) and return ``(trusted classes, {name: the AST dump
    of its class statement})``."""
    if not source:
        return {}, {}
    import ast  # noqa: PLC0415 - only for a task with trusted classes (a lean zygote heap)

    try:
        module = ast.parse(source, "<trusted>")
    except (SyntaxError, ValueError):
        return {}, {}
    dumps = {}
    for node in module.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef)):
            continue
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), "<trusted>", "exec"), namespace)
        except Exception:  # noqa: BLE001 - a trusted statement that fails here defines nothing
            continue
        if isinstance(node, ast.ClassDef):
            dumps[node.name] = ast.dump(node)
    trusted = trusted_classes(namespace, exclude=(entry_point, "candidate"))
    return trusted, {name: dump for name, dump in dumps.items() if name in trusted}


def _program_code(source, path, verbatim):
    """The program compiled, minus any module-level class statement that is a trusted class's
    definition verbatim (``verbatim``: name -> AST dump): the name keeps the trusted class."""
    if not verbatim:
        return compile(source, path, "exec")
    import ast  # noqa: PLC0415 - only for a task with trusted classes (a lean zygote heap)

    module = ast.parse(source, path)
    module.body = [
        node
        for node in module.body
        if not (isinstance(node, ast.ClassDef) and verbatim.get(node.name) == ast.dump(node))
    ]
    return compile(module, path, "exec")


def main(spec):
    requests = os.fdopen(spec["request_fd"], "rb")
    reply_fd = spec["reply_fd"]

    def reply(message):
        data = dumps_line(message)
        while data:
            data = data[os.write(reply_fd, data) :]

    if spec.get("stdio"):
        _serve_stdio(spec, requests, reply)
        os._exit(0)
    namespace = {"__name__": "__main__"}
    # Trusted content first, before the audit hook: what it does is not the program's.
    trusted, verbatim = _trusted_definitions(
        spec.get("trusted") or "", namespace, spec.get("entry_point")
    )
    codec = Codec(trusted, placeholders=True)
    if spec.get("audit_fd") is not None:
        # Before the submission's first line; the token leaves the spec (and so every frame).
        _audit_install(spec.pop("audit_fd"), spec.pop("audit_token", ""), main.__code__)

    try:
        source = _read_text(spec["solution_path"])
        exec(_program_code(source, spec["solution_path"], verbatim), namespace)
    except SystemExit as exc:
        # A script (output-based verifiers: spec "script") may end with exit(0); for
        # unit tests any exit while loading is a load error, so no test can run.
        if not (spec.get("script") and exc.code in (None, 0)):
            _audit(AUDIT_END)
            reply({"load_error": f"SystemExit: {str(exc)[:500]}"})
            os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - any other failure to load is a load error
        _audit(AUDIT_END)
        reply({"load_error": f"{type(exc).__name__!s}: {str(exc)[:500]}"})
        os._exit(0)
    call_s = 0.0  # CPU seconds inside the tests' calls (the end line reports it)
    try:
        reply({"ready": True})
        for line in requests:
            try:
                request = json.loads(line)
                if "read_files" in request:
                    reply({"ok": encode(_read_files(list(request["read_files"])))})
                    continue
                function = namespace[request["name"]]
                args = codec.decode(request["args"])
                kwargs = codec.decode(request["kwargs"])
                started = _thread_time()
                try:
                    value = _call(function, args, kwargs, request.get("timeout_s"))
                finally:
                    call_s += _thread_time() - started
                result = {"ok": codec.encode(value)}
            except BaseException as exc:  # noqa: BLE001 - SystemExit/SkipTest in a call fail that call
                result = {"error": _describe(exc)}
            reply(result)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        # The end line: the harness got here (also when the tests' side went away first).
        _audit(AUDIT_END, round(call_s * 1000, 3))
    os._exit(0)


def _serve_stdio(spec, requests, reply):
    """The ``stdio`` verifier's side of the program: compile it once, then run it afresh on
    each case's input (see the module's docstring). The audit hook goes into each case's
    process as it starts, so the harness's own forks are not the program's; this process
    installs it last, for the end line (its CPU figure: every case's process together)."""
    audit = (spec.pop("audit_fd", None), spec.pop("audit_token", ""))
    try:
        source = _read_text(spec["solution_path"])
        code = compile(source, spec["solution_path"], "exec")
    except BaseException as exc:  # noqa: BLE001 - a program that does not compile fails every case
        code = None
        reply({"load_error": f"{type(exc).__name__}: {str(exc)[:500]}"})
    if code is not None:
        reply({"ready": True})
        for line in requests:
            try:
                request = json.loads(line)
                stdin = request["stdin"]
                if type(stdin) is not str:
                    raise ValueError("a case's input must be text")
                timeout_s = request.get("timeout_s")
                result = {"ok": _stdio_case(code, stdin.encode("utf-8"), timeout_s, audit)}
            except Exception as exc:  # noqa: BLE001 - a malformed request or failed fork fails the case
                result = {"error": _describe(exc)}
            reply(result)
    if audit[0] is not None:
        _audit_install(audit[0], audit[1], _serve_stdio.__code__)
        times = os.times()
        _audit(AUDIT_END, round((times.children_user + times.children_system) * 1000, 3))


def _stdin_fd(data):
    """A readable descriptor holding ``data`` from offset 0 (an anonymous memory file)."""
    fd = os.memfd_create("stdin") if hasattr(os, "memfd_create") else None
    if fd is None:  # pragma: no cover - Linux has memfd_create
        path = f"/tmp/.stdin-{os.getpid()}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.unlink(path)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _stdio_case(code, data, timeout_s, audit):
    """Run ``code`` as ``__main__`` in a child fed ``data`` on fd 0; its outcome as data."""
    in_fd = _stdin_fd(data)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the case's process: never returns
        _stdio_child(code, in_fd, out_w, err_w, (out_r, err_r), audit)
    for fd in (in_fd, out_w, err_w):
        os.close(fd)
    deadline = time.monotonic() + (float(timeout_s) if timeout_s else 3600.0)
    chunks = {out_r: [], err_r: []}
    sizes = {out_r: 0, err_r: 0}
    open_fds = [out_r, err_r]
    status = None
    timed_out = exceeded = False
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(open_fds, [], [], min(left, 0.05))
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.remove(fd)
                continue
            sizes[fd] += len(chunk)
            if fd == out_r:
                chunks[fd].append(chunk)
            else:
                chunks[fd] = (chunks[fd] + [chunk])[-4:]
        if sizes[out_r] > MAX_STDOUT_BYTES:
            exceeded = True
            break
        if status is None:
            done, status_now = os.waitpid(pid, os.WNOHANG)
            if done:
                status = status_now
        if status is not None and not ready:
            break  # exited, and nothing more is coming now (a leftover child may hold a pipe)
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if status is None:
        status = os.waitpid(pid, 0)[1]
    for fd in (out_r, err_r):
        os.close(fd)
    stdout = b"".join(chunks[out_r])[:MAX_STDOUT_BYTES]
    stderr = b"".join(chunks[err_r])[-STDERR_TAIL_BYTES:]
    killed = timed_out or exceeded
    return {
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "exit": None if killed or not os.WIFEXITED(status) else os.WEXITSTATUS(status),
        "signal": None if killed or not os.WIFSIGNALED(status) else os.WTERMSIG(status),
        "timed_out": timed_out,
        "output_exceeded": exceeded,
    }


def _stdio_child(code, in_fd, out_w, err_w, parent_fds, audit):
    """In the case's process: fds 0-2 become the case's, then the program runs as
    ``__main__``; exits with its status (1 on an uncaught exception)."""
    status = 1
    try:
        os.setpgid(0, 0)
        for target, fd in ((0, in_fd), (1, out_w), (2, err_w)):
            os.dup2(fd, target)
        keep = {0, 1, 2} | ({audit[0]} if audit[0] is not None else set())
        for fd in (in_fd, out_w, err_w, *parent_fds):
            if fd not in keep:
                os.close(fd)
        for fd in range(3, 16):  # the harness's pipes to the tests' side and the job
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", closefd=False)
        if audit[0] is not None:  # (no end line from here: the serving process sends it)
            _audit_install(audit[0], audit[1], _stdio_child.__code__, STDIO_IGNORED)
        audit = None  # the token leaves this frame before the program runs
        try:
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            status = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                status = (exc.code or 0) & 0xFF
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - the program's crash: reported, status 1
            import traceback  # noqa: PLC0415 - only for a crashing case

            traceback.print_exc()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a closed or broken stdout: the output is what arrived
            pass
    finally:
        os._exit(status)


if __name__ == "__main__":
    main(json.loads(sys.stdin.read()))
