"""The supervisor of a repository grading: the only process that holds the answer's nonce.

``sandboxes/repository/grading.py`` runs ``python3 -I -B -c BOOT`` in a fresh session; BOOT
reads a header line from stdin (``{"nonce", "supervisor": n}``), compiles the next ``n``
bytes (this source) and calls :func:`main` with the nonce and the rest of stdin (the
runner's configuration line and the runner's source, ``pytest_repository.py``), which it
hands on to the pytest process without reading it.

What it does, and why:

* it makes itself non-dumpable (``PR_SET_DUMPABLE`` 0) before anything else runs, so no
  process of the session, whatever it runs, can read its memory (``/proc/<pid>/mem``,
  ``ptrace``) or reach its descriptors through ``/proc/<pid>/fd``: the nonce and the
  session's stdout, which only this process holds, stay out of reach of the code under test;
* it starts the pytest process (``python3 -I -B``) with the payload on a pipe as its
  stdin, stdout and stderr on ``/dev/null`` (the runner logs to a file of its own) and one
  more descriptor, the *report pipe*, on which the runner writes a hello line (its token,
  before any workspace code runs) and, at the end, its answer carrying the same token;
* once the answer came (or the pipe closed), it waits for the pytest process, kills every
  other process of the session (``kill(-1)``: nothing forked by the code under test outlives
  the run or writes afterwards), reads what is left on the pipe, and writes one frame,
  ``<nonce> BEGIN <literal> <nonce> END``, as the last bytes of its stdout.

The answer is voided (``{"ran": False, "forged": ...}``) when the report pipe carried anything
but the hello and the answer lines with the runner's token: code under test that writes a
report of its own to every descriptor it can find only ever voids its own grading.
Standard library only.
"""

import ast
import ctypes
import os
import signal
import sys

PR_SET_DUMPABLE = 4
REPORT_CAP_BYTES = 6 * 1024**2  # under the session's output cap (the frame repeats it)
CHILD_BOOT = (
    "import sys\n"
    "def _boot():\n"
    "    data = sys.stdin.buffer.read()\n"
    "    cut = data.index(b'\\n')\n"
    "    scope = {'__name__': 'crucible_grading_runner'}\n"
    "    exec(compile(data[cut + 1:], 'crucible-grading-runner', 'exec'), scope)\n"
    "    scope['main'](data[:cut], int(sys.argv[1]), data[cut + 1:])\n"
    "_boot()\n"
)


def _nondumpable():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _start(payload):
    """Fork and exec the pytest process; returns ``(pid, report_read_fd)``."""
    report_r, report_w = os.pipe()
    feed_r, feed_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the pytest process, before its exec: nothing here may raise past _exit
        try:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(feed_r, 0)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.dup2(report_w, 3)
            os.closerange(4, 65536)
            os.set_inheritable(3, True)
            os.execv(
                sys.executable,
                [sys.executable, "-I", "-B", "-c", CHILD_BOOT, "3"],
            )
        finally:
            os._exit(127)
    os.close(report_w)
    os.close(feed_r)
    view = memoryview(payload)
    while view:  # the runner reads all of it before it does anything else
        view = view[os.write(feed_w, view) :]
    os.close(feed_w)
    return pid, report_r


def _read_until_answer(fd):
    """The report pipe's bytes up to the end of the first answer line (``A ...``), or to EOF;
    capped."""
    data = b""
    while len(data) < REPORT_CAP_BYTES:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
        if any(line.startswith(b"A ") for line in data.split(b"\n")[:-1]):
            break
    return data


def _drain(fd):
    """What is left on the pipe after every other process is gone (non-blocking)."""
    os.set_blocking(fd, False)
    left = b""
    try:
        while len(left) < 4096:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            left += chunk
    except BlockingIOError:
        pass
    return left


def judge(data):
    """The answer in the report pipe's ``data`` (``H <token>``, then ``A <token> <literal>``),
    or a voided one saying why."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        return {"ran": False, "error": "the pytest process never reported (an early exit, a crash)"}
    hello = lines[0].split(b" ")
    if len(hello) != 2 or hello[0] != b"H" or len(hello[1]) != 32:
        return {"ran": False, "forged": "the report pipe did not start with the runner's hello"}
    token = hello[1]
    if len(lines) == 1:
        return {"ran": False, "error": "the pytest process ended before its answer"}
    if len(lines) > 2:
        return {"ran": False, "forged": f"{len(lines) - 2} line(s) not the runner's on its pipe"}
    head, _, literal = lines[1].partition(b" " + token + b" ")
    if head != b"A" or not literal:
        return {"ran": False, "forged": "an answer without the runner's token"}
    try:
        answer = ast.literal_eval(literal.decode("ascii"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        return {"ran": False, "forged": "an answer that does not parse"}
    if not isinstance(answer, dict):
        return {"ran": False, "forged": "an answer that is not a mapping"}
    return answer


def main(nonce, payload):
    """Run the grading (see the module) and write the frame; never returns."""
    try:
        _nondumpable()
        pid, report = _start(payload)
        data = _read_until_answer(report)
        if len(data) >= REPORT_CAP_BYTES:  # a flood of the pipe: nothing more is read
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except BaseException as exc:  # noqa: BLE001 - a frame is always written
        data, report = b"", None
        answer = {"ran": False, "error": f"supervisor: {type(exc).__name__}: {exc}"[:500]}
    else:
        answer = None
    try:
        os.kill(-1, signal.SIGKILL)  # every other process of the session (never pid 1 or us)
    except OSError:
        pass
    if answer is None:
        left = _drain(report) if report is not None else b""
        answer = judge(data + left)
    frame = ("\n" + nonce + " BEGIN " + ascii(answer) + " " + nonce + " END\n").encode("ascii")
    view = memoryview(frame)
    while view:
        view = view[os.write(1, view) :]
    os._exit(0)
