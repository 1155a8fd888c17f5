"""The init of one sandbox session: pid 1 of the session's namespaces, for the session's life.

Loaded into the session zygote as its role (``zygote.py`` clones it on ``{"op":
"session"}`` into new mount, pid, network, ipc and uts namespaces) with two names given
to it: ``zygote`` (the zygote's module: ``mount``, ``libc``, ``install_seccomp``,
``recv_message``...) and the functions of ``session_files.py``. Standard library only.

Setup, before the zygote answers the host (a failure is reported on the setup pipe, an
``infra_error``):
  1. The workspace: a private tmpfs (``workspace_bytes``, ``workspace_inodes``) holds the
     overlay's upper and work directories; the overlay (lower: the materialised workspace
     under ``/.store/<digest>``, read-only) is mounted on ``/workspace``. A descriptor of the
     lower directory is kept (the diff's starting point); then the layers' tmpfs and the
     whole ``/.store`` are detached from this mount namespace, so no process of the session
     can reach the upper layer, the lower layer's path, or any other workspace.
  1b. A terminal session (``state_dirs`` in the request: absolute directories such as ``/app``
     or ``/etc/nginx``, each held in the workspace at the same path without its leading ``/``)
     gets a root of its own: a small tmpfs with recursive binds of the zygote's root entries,
     made read-only, then each state directory bound from the workspace onto its path (a
     missing one is made on the new tmpfs: only a top-level directory of its own can be), a
     ``ro`` one remounted read-only; the init pivots into it. The workspace stays at
     ``/workspace`` (file operations and diffs work on it as for any session).
  2. ``/tmp`` and ``/dev/shm``: tmpfs of their own (``tmp_bytes``, ``shm_bytes``); ``/proc``
     of the session's pid namespace; loopback up (the session's network namespace has no
     other interface); hostname ``sandbox``.
  3. ``PDEATHSIG`` (the session dies with its zygote, which dies with its worker).

Then it serves the control socket (SOCK_SEQPACKET, one JSON message each, descriptors by
SCM_RIGHTS): ``{"op": "begin", "env"}`` (the host has moved it into the session's cgroup:
only now does it fork; ``env`` is the calls' base environment), ``{"op": "exec", ...}``,
``{"op": "file", ...}`` with the call's pipes, ``{"op": "kill"}`` (the host saw an output
flood) and ``{"op": "close"}``.

An ``exec`` runs in a shell booted ahead: a child forked after the previous call that
entered the sandbox (its own session, the sandbox user with no capabilities,
``no_new_privs``, the seccomp filter, the session's rlimits) and ``execve``d ``bash``
at once, its stdio on pipes this process made, sourcing its job from a pipe on fd 3. So
no interpreter start is on a call's path: the call writes the job (``job_script``: CPU
limit, environment, working directory, then ``eval`` of the command, as ``bash -c``
runs it) and hands the host the read ends of stdout and stderr (and stdin's write end)
with ``{"started": true, "fds"}``. A ``file`` call forks a child that enters the sandbox
the same way and runs one operation of ``session_files.py`` in-process, its JSON on the
stdout pipe the host sent. When the call's process exits (or its wall clock runs out:
SIGKILL) every other process of the session is killed (``kill(-1, SIGKILL)`` from pid 1
reaches the whole namespace and nothing outside it) and reaped, unless the call keeps
them (``keep``: they live until the session closes; a timeout then kills the call's own
process group). The answer: ``{"exited": true, "status", "cpu_ms", "maxrss_kb",
"timed_out", "killed", "error", "stage"}``; ``stage``/``error`` say what failed before the
command ran: ``setup`` (the sandbox's own step, said on a close-on-exec pipe, so nothing the
command starts can claim it), ``cwd`` (the caller's working directory, said by the job on a
pipe it closes before the command runs), ``fork`` (the session's process limit).
"""

import array
import fcntl
import json
import os
import resource
import select
import shlex
import signal
import socket
import struct
import time

STORE = "/.store"
WORKSPACE = "/workspace"
LAYERS = "/tmp"  # where the layers' tmpfs is mounted, then detached
BASH = "/bin/bash"
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_PIVOT_ROOT, SYS_MOUNT_SETATTR = 155, 442  # x86_64
# Where a state directory may not go: the session's own mounts and the kernel's.
NOT_STATE = ("/proc", "/dev", "/sys", "/tmp", "/workspace", "/.store", "/.old")
STATE_DIRS = []  # this session's state directories (absolute), set by main
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40
REAP_ROUNDS = 500  # kill(-1) and reap, 1 ms apart: a fork racing the first kill is caught


def main(request, named, config, parent_alive, setup):
    """Set the session up (see the module), report ``ok`` on the setup pipe, serve it."""
    low = setup["fd"]
    setup["fd"] = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 1024)
    os.close(low)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    limits = request["limits"]
    digest = str(request["workspace"])
    if len(digest) != 64 or digest.strip("0123456789abcdef"):
        raise ValueError(f"workspace digest {digest[:80]!r} is not a SHA-256 in hex")
    lower_fd = build_workspace(digest, limits, config["sandbox_uid"])
    if request.get("state_dirs"):
        STATE_DIRS[:] = enter_state_root(request["state_dirs"])
    tmp = f"size={limits['tmp_bytes']},nr_inodes={limits['workspace_inodes']},mode=1777"
    zygote.mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp)  # noqa: F821 - given by the zygote
    shm = f"size={limits['shm_bytes']},nr_inodes=1024,mode=1777"
    zygote.mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm)  # noqa: F821
    zygote.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # noqa: F821
    loopback_up()
    zygote.libc.sethostname(b"sandbox", 7)  # noqa: F821
    zygote.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # noqa: F821
    if select.select([parent_alive], [], [], 0)[0]:  # EOF: the zygote died before PDEATHSIG
        os._exit(121)
    control = named["control"]
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # not the zygote's (the worker's log): nothing of ours writes there
        os.dup2(null, fd)
    _close_all_but({0, 1, 2, control, lower_fd, setup["fd"]})
    os.write(setup["fd"], b"ok")
    os.close(setup["fd"])
    setup["fd"] = None
    Session(socket.socket(fileno=control), lower_fd, config, limits).serve()


def build_workspace(digest, limits, uid):
    """Mount the overlay on ``/workspace`` and detach its layers and the store (see the module).

    Returns:
        a descriptor (``O_PATH``) of the lower directory: the workspace as it started.
    """
    layers = f"size={limits['workspace_bytes']},nr_inodes={limits['workspace_inodes']},mode=0700"
    zygote.mount("tmpfs", LAYERS, "tmpfs", MS_NOSUID | MS_NODEV, layers)  # noqa: F821
    os.mkdir(LAYERS + "/upper", 0o755)
    os.chown(LAYERS + "/upper", uid, uid)  # the workspace's root belongs to the sandbox user
    os.mkdir(LAYERS + "/work", 0o700)
    lower = STORE + "/" + digest
    options = f"lowerdir={lower},upperdir={LAYERS}/upper,workdir={LAYERS}/work,userxattr"
    zygote.mount("overlay", WORKSPACE, "overlay", MS_NOSUID | MS_NODEV, options)  # noqa: F821
    lower_fd = os.open(lower, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    # The overlay holds private clones of its layers: both mounts can leave this namespace.
    for path in (LAYERS, STORE):
        zygote._check(zygote.libc.umount2(path.encode(), MNT_DETACH), "umount " + path)  # noqa: F821
    return lower_fd


def check_state_dirs(state_dirs):
    """``[(path, writable)]`` of the request's ``[[path, "rw"|"ro"], ...]``: absolute,
    normalised, none inside another, none where the session's own mounts are.

    Raises:
        ValueError: naming the entry.
    """
    checked = []
    if not isinstance(state_dirs, list) or len(state_dirs) > 64:
        raise ValueError("state_dirs must be a list of at most 64 [path, mode] pairs")
    for entry in state_dirs:
        if not (isinstance(entry, list) and len(entry) == 2 and entry[1] in ("rw", "ro")):
            raise ValueError(f"state directory {str(entry)[:100]!r} is not [path, 'rw'|'ro']")
        path = entry[0]
        if (
            not isinstance(path, str)
            or not path.startswith("/")
            or path == "/"
            or os.path.normpath(path) != path
            or "\0" in path
            or len(path) > 1024
        ):
            raise ValueError(
                f"state directory {str(path)[:100]!r} is not a normalised absolute path"
            )
        if any(path == bad or path.startswith(bad + "/") for bad in NOT_STATE):
            raise ValueError(f"state directory {path!r} lies where the session mounts its own")
        checked.append((path, entry[1] == "rw"))
    paths = sorted(p for p, _w in checked)
    for first, second in zip(paths, paths[1:]):
        if second == first or second.startswith(first + "/"):
            raise ValueError(f"state directory {second!r} lies inside {first!r}")
    return checked


def _mount_setattr(path, attrs):
    attr = zygote.MountAttr(attrs, 0, 0, 0)  # noqa: F821
    ret = zygote.libc.syscall(  # noqa: F821
        SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE, zygote.ctypes.byref(attr),  # noqa: F821
        zygote.ctypes.sizeof(attr),  # noqa: F821
    )  # fmt: skip
    if ret != 0:  # the zygote fell back to remounts too (gVisor): do the same mount by mount
        zygote.remount_each_read_only(under=path)  # noqa: F821


def enter_state_root(state_dirs):
    """Build the terminal session's root and pivot into it (step 1b of the module); returns the
    state directories' paths.

    Raises:
        ValueError: a bad ``state_dirs`` entry, or one the workspace does not hold as a
            directory, or one whose path crosses a link or cannot be made.
        OSError: a mount failed (an ``infra_error``).
    """
    checked = check_state_dirs(state_dirs)
    new = LAYERS  # free again: build_workspace detached the layers' tmpfs from it
    zygote.mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")  # noqa: F821
    entries = set()
    for name in sorted(os.listdir("/")):
        source = "/" + name
        if source in ("/tmp", "/.store") or name.startswith(".old"):
            continue
        entries.add(name)
        if source == WORKSPACE:  # bound read-write below
            os.mkdir(new + source, 0o755)
        elif os.path.islink(source):
            os.symlink(os.readlink(source), new + source)
        elif os.path.isdir(source):
            os.mkdir(new + source, 0o755)
            zygote.mount(source, new + source, None, MS_BIND | MS_REC)  # noqa: F821
    os.mkdir(new + "/tmp", 0o1777)
    for path, _writable in checked:  # a top-level directory of its own: made on the new tmpfs
        if path.strip("/").split("/")[0] not in entries:
            os.makedirs(new + path, 0o755)
    # Everything so far read-only (the binds keep no write access of their own), the workspace
    # bound again read-write below.
    _mount_setattr(new, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
    zygote.mount(WORKSPACE, new + WORKSPACE, None, MS_BIND | MS_REC)  # noqa: F821
    for path, writable in sorted(checked):
        source = WORKSPACE + path
        if not os.path.isdir(source) or os.path.islink(source):
            raise ValueError(f"state directory {path!r} is not a directory of the workspace")
        target = new
        for part in path.strip("/").split("/"):  # inside a bound system directory: must exist
            target += "/" + part
            if os.path.islink(target) or not os.path.isdir(target):
                raise ValueError(
                    f"state directory {path!r}: {target[len(new) :]} is a link or not a "
                    "directory of the environment's root"
                )
        zygote.mount(source, target, None, MS_BIND | MS_REC)  # noqa: F821
        if not writable:
            read_only = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            zygote.mount(None, target, None, read_only)  # noqa: F821
    os.chdir(new)
    zygote._check(zygote.libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # noqa: F821
    zygote._check(zygote.libc.umount2(b".", MNT_DETACH), "umount the old root")  # noqa: F821
    os.chdir("/")
    return [path for path, _w in checked]


def loopback_up():
    """Bring ``lo`` up: the session's network namespace has nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING, b"")
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, request)


def _close_all_but(keep):
    start = 0
    for fd in sorted(keep):
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)


class Session:
    """The session's serving loop (pid 1): one call at a time, the next shell booted ahead."""

    def __init__(self, control, lower_fd, config, limits):
        self.control = control
        self.lower_fd = lower_fd
        self.config = config
        self.limits = limits
        self.env = {}  # the shells' environment, from the host's "begin"
        self.job = None
        self.spare = None  # the next exec's shell, booted and waiting (see boot_shell)
        self.poller = select.poll()

    def serve(self):
        self.poller.register(self.control.fileno(), select.POLLIN)
        while True:
            timeout = None
            if self.job is not None:
                timeout = max(0, int((self.job["deadline"] - time.monotonic()) * 1000) + 1)
            events = self.poller.poll(timeout)
            job = self.job
            if job is not None and not job["timed_out"] and time.monotonic() >= job["deadline"]:
                job["timed_out"] = True
                self.stop_call(job)
            for fd, _mask in events:
                if fd == self.control.fileno():
                    self.on_control()
                elif self.job is not None and fd == self.job["pidfd"]:
                    self.finish()
            if self.job is None:
                zygote.reap_children()  # noqa: F821 - processes a call kept, that ended since

    def on_control(self):
        try:
            message, fds = zygote.recv_message(self.control)  # noqa: F821
        except (OSError, ValueError):
            message, fds = None, []
        if message is None:  # the host is gone or closed us: nothing of the session stays
            self.shutdown(reply=False)
        op = message.get("op")
        if op == "exec" and self.job is None:
            for fd in fds:
                os.close(fd)
            self.start_exec(message)
            return
        if op == "file" and self.job is None:
            self.start_file(message, fds)
            return
        for fd in fds:
            os.close(fd)
        if op == "begin":  # the host has moved us into the session's cgroup: fork from now on
            self.env = {str(k): str(v) for k, v in (message.get("env") or {}).items()}
            if self.spare is None and self.job is None:
                self.spare = self.boot_shell()
        elif op == "kill":
            if self.job is not None:
                self.job["killed"] = True
                self.stop_call(self.job)
        elif op == "close":
            self.shutdown(reply=True)
        else:
            zygote.send_message(self.control, {"error": f"unexpected {op!r}"})  # noqa: F821

    def boot_shell(self):
        """Fork the next exec's process and let it become ``bash`` at once: in the sandbox (see
        :func:`enter_sandbox`), its stdio on pipes made here, sourcing its job from fd 3 (the
        whole job is read before any of it runs). A failure before the exec is said on fd 4,
        close-on-exec (so nothing the command starts can write there); the job's own refusal
        of its working directory on fd 5, closed before the command runs. Returns the spare (a
        dict of its pid and our ends of its pipes), or None when the session's process limit
        refuses the fork."""
        pipes = [os.pipe() for _ in range(6)]  # stdin, stdout, stderr, job, setup, word
        try:
            pid = os.fork()
        except OSError:
            for pair in pipes:
                for fd in pair:
                    os.close(fd)
            return None
        (in_r, in_w), (out_r, out_w), (err_r, err_w), (job_r, job_w), setup, word = pipes
        if pid == 0:
            try:
                _place({0: in_r, 1: out_w, 2: err_w, 3: job_r, 4: setup[1], 5: word[1]})
                os.set_inheritable(4, False)
                uid = self.config["sandbox_uid"]
                os.fchown(3, uid, uid)  # bash reopens it (/dev/fd/3) as the sandbox user
                enter_sandbox(self.config, self.limits)
                os.execve(BASH, ["bash", "-c", ". /dev/fd/3"], self.env)
            except BaseException as exc:  # noqa: BLE001 - said on fd 4, never raised
                _write_word(4, zygote.describe(exc))  # noqa: F821
            finally:
                os._exit(127)
        for fd in (in_r, out_w, err_w, job_r, setup[1], word[1]):
            os.close(fd)
        return {"pid": pid, "stdin": in_w, "stdout": out_r, "stderr": err_r, "job": job_w,
                "setup": setup[0], "word": word[0]}  # fmt: skip

    def take_spare(self):
        """The booted shell, or a new one if it is gone (a process a call kept may kill it)."""
        spare, self.spare = self.spare, None
        if spare is not None and _exited(spare["pid"]):
            _reap(spare["pid"])
            _close_spare(spare, "stdin", "stdout", "stderr", "job", "setup", "word")
            spare = None
        return spare or self.boot_shell()

    def start_exec(self, message):
        where = workspace_dir(message.get("cwd"))
        if where is None:
            self.reply_unstarted("cwd", f"{message.get('cwd')!r} is not a path in the workspace")
            return
        spare = self.take_spare()
        if spare is None:
            self.reply_unstarted("fork", "the session's process limit is reached")
            return
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        script = job_script(message, where).encode("utf-8", "surrogateescape")
        message["deadline"] = time.monotonic() + float(message.get("wall_timeout_s", 30.0))
        _write_within(spare["job"], script, message["deadline"])  # read whole, then run
        os.close(spare["job"])
        handed = ["stdout", "stderr"] + (["stdin"] if message.get("stdin") else [])
        if not message.get("stdin"):
            os.close(spare["stdin"])  # EOF at once
        rights = array.array("i", [spare[name] for name in handed])
        self.control.sendmsg(
            [json.dumps({"started": True, "fds": handed}).encode()],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)],
        )
        for name in handed:
            os.close(spare[name])
        self.begin_job(spare["pid"], (spare["setup"], spare["word"]), message, before)

    def start_file(self, message, fds):
        """A file operation: a fresh child (no shell), run in-process (``run_file_child``)."""
        named = dict(zip(message.get("fds", []), fds, strict=False))
        st_r, st_w = os.pipe()  # setup failures: never written once the operation runs
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            pid = os.fork()
        except OSError:
            for fd in (*fds, st_r, st_w):
                os.close(fd)
            self.reply_unstarted("fork", "the session's process limit is reached")
            return
        if pid == 0:
            try:
                stdin = named.get("stdin")
                _place({0: stdin if stdin is not None else -1, 1: named["stdout"],
                        2: named["stderr"], 4: st_w}, keep=(self.lower_fd,))  # fmt: skip
                enter_sandbox(self.config, self.limits)
                run_file_child(message, self.lower_fd)
            except BaseException as exc:  # noqa: BLE001 - said on fd 4, never raised
                _write_word(4, zygote.describe(exc))  # noqa: F821
            finally:
                os._exit(120)
        for fd in (*fds, st_w):
            os.close(fd)
        self.begin_job(pid, (st_r, None), message, before)

    def begin_job(self, pid, words, message, before):
        """Watch the call's process; ``words``: its setup pipe and its job's word pipe (or None)."""
        pidfd = os.pidfd_open(pid)
        self.poller.register(pidfd, select.POLLIN)
        self.job = {
            "pid": pid,
            "pidfd": pidfd,
            "words": words,
            "deadline": message.get("deadline")
            or time.monotonic() + float(message.get("wall_timeout_s", 30.0)),
            "keep": bool(message.get("keep")),
            "timed_out": False,
            "killed": False,
            "before": before,
        }

    def stop_call(self, job):
        """Kill the running call: the whole session, or only its process group when it keeps
        its processes (those it left earlier live on)."""
        try:
            if job["keep"]:
                os.killpg(job["pid"], signal.SIGKILL)
            else:
                os.kill(-1, signal.SIGKILL)
        except OSError:
            pass

    def finish(self):
        job, self.job = self.job, None
        self.poller.unregister(job["pidfd"])
        os.close(job["pidfd"])
        _pid, status, usage = os.wait4(job["pid"], 0)
        setup, word = (_read_word(fd) for fd in job["words"])
        stage, error = ("setup", setup) if setup else ("cwd", word) if word else (None, None)
        if not job["keep"]:
            kill_all()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = job["before"]
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        zygote.send_message(  # noqa: F821
            self.control,
            {
                "exited": True,
                "status": status,
                "cpu_ms": round(cpu * 1000, 3),
                "maxrss_kb": usage.ru_maxrss,
                "timed_out": job["timed_out"],
                "killed": job["killed"],
                "error": error,
                "stage": stage,
            },
        )
        if self.spare is None:
            self.spare = self.boot_shell()

    def reply_unstarted(self, stage, error):
        zygote.send_message(  # noqa: F821
            self.control,
            {"exited": False, "status": None, "cpu_ms": 0.0, "maxrss_kb": 0, "timed_out": False,
             "killed": False, "error": error, "stage": stage},
        )  # fmt: skip

    def shutdown(self, *, reply):
        kill_all()
        if reply:
            try:
                zygote.send_message(self.control, {"closed": True})  # noqa: F821
            except OSError:
                pass
        os._exit(0)


def workspace_dir(cwd):
    """The absolute directory for a call's ``cwd`` (relative to the workspace, or under
    ``/workspace/`` or, in a terminal session, a state directory), or None for one that names
    another place (an absolute path elsewhere, a ``..``). Links on it are checked by the shell
    (``job_script``)."""
    if isinstance(cwd, str) and any(cwd == d or cwd.startswith(d + "/") for d in STATE_DIRS):
        return cwd if ".." not in cwd.split("/") and os.path.normpath(cwd) == cwd else None
    try:
        where = clean_path(cwd if cwd is not None else ".")  # noqa: F821 - from session_files
    except Exception:  # noqa: BLE001 - a FileOpError: the caller's path
        return None
    parts = [] if where == "." else where.split("/")
    if ".." in parts:
        return None
    return "/".join([WORKSPACE, *[p for p in parts if p != "."]])


def job_script(message, where):
    """What the booted shell sources for one exec: its CPU limit, the call's environment, its
    working directory (refused, on fd 4, where a link leads it out of the workspace), then the
    command, as ``bash -c`` would run it (``eval``; a syntax error is the command's own)."""
    lines = [
        "exec 3<&-",
        f"ulimit -t {max(1, int(message.get('cpu_s') or 30))} 2>/dev/null",
    ]
    for name, value in (message.get("env") or {}).items():
        lines.append(f"export {name}={shlex.quote(str(value))}")
    where = shlex.quote(where)
    inside = " || ".join(
        f"$PWD == {shlex.quote(top)} || $PWD == {shlex.quote(top)}/*"
        for top in [WORKSPACE, *STATE_DIRS]
    )
    lines.append(
        f"cd -P -- {where} 2>/dev/null && [[ {inside} ]]"
        f" || {{ printf %s {shlex.quote('not a directory of the workspace: ' + where)} >&5;"
        " exit 126; }"
    )
    lines.append("exec 5>&-")
    lines.append("eval -- " + shlex.quote(str(message["command"])))
    return "\n".join(lines) + "\n"


def enter_sandbox(config, limits):
    """In a call's child: a session of its own, default signals, the OOM killer's first choice,
    the session's rlimits, the sandbox user with no capabilities, ``no_new_privs``, the
    seccomp filter."""
    # Not dumpable until the exec (which makes it so again): a process a call kept, running as
    # the same user, cannot attach to it or open its descriptors while it sets up.
    zygote.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # noqa: F821
    os.setsid()
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # Python ignores some; an exec'd program must not
    zygote.oom_first()  # noqa: F821 - the session's OOM victim is a call's process, never pid 1
    zygote.cap_limit(resource.RLIMIT_CORE, 0, 0)  # noqa: F821
    zygote.cap_limit(resource.RLIMIT_NOFILE, 1024, 1024)  # noqa: F821
    fsize = limits["workspace_bytes"]
    zygote.cap_limit(resource.RLIMIT_FSIZE, fsize, fsize)  # noqa: F821
    if limits.get("address_space_bytes"):
        space = limits["address_space_bytes"]
        zygote.cap_limit(resource.RLIMIT_AS, space, space)  # noqa: F821
    uid = config["sandbox_uid"]
    if uid != 0:
        if limits.get("rlimit_processes"):
            count = limits["rlimit_processes"]
            zygote.cap_limit(resource.RLIMIT_NPROC, count, count)  # noqa: F821
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # leaves uid 0: every capability is gone
    else:
        zygote.drop_capabilities()  # noqa: F821
    zygote.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # noqa: F821
    zygote.install_seccomp(config["seccomp"])  # noqa: F821


def run_file_child(job, lower_fd):
    """One file operation (``session_files.py``), its JSON answer on stdout, then exit."""
    cpu_s = int(job.get("cpu_s") or 0)
    if cpu_s:
        zygote.cap_limit(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)  # noqa: F821
    work_fd = os.open(WORKSPACE, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    data = b""
    if "stdin" in job.get("fds", []):
        data = read_upto(0, int(job.get("max_input_bytes", 1 << 26)) + 1)  # noqa: F821
    args = dict(job.get("args") or {})
    path = args.get("path")
    if isinstance(path, str) and any(path == d or path.startswith(d + "/") for d in STATE_DIRS):
        args["path"] = path[1:]  # a state directory's path: where it lies in the workspace
    answer = run_file_op(job["file_op"], args, data, work_fd, lower_fd)  # noqa: F821
    out = json.dumps(answer).encode()
    while out:
        out = out[os.write(1, out) :]
    os._exit(0)


def _place(targets, keep=()):
    """Put descriptors on fixed numbers (``{target: source}``, -1: ``/dev/null``) and close
    every other one but ``keep``; the placed ones survive an exec."""
    moved = {}
    for target, source in targets.items():
        if source < 0:
            source = os.open("/dev/null", os.O_RDONLY)
        moved[target] = fcntl.fcntl(source, fcntl.F_DUPFD, 10)  # off the targets
    for target, fd in moved.items():
        os.dup2(fd, target)  # inheritable
    _close_all_but(set(targets) | set(keep))


def _close_spare(spare, *names):
    for name in names:
        try:
            os.close(spare[name])
        except OSError:
            pass


def _write_word(fd, word):
    try:
        os.write(fd, word[:2000].encode("utf-8", "replace"))
    except OSError:
        pass


def _read_word(fd):
    """What a call's process said on one of its word pipes ("" if nothing), the pipe closed."""
    if fd is None:
        return ""
    try:
        os.set_blocking(fd, False)
        return os.read(fd, 4096).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _write_within(fd, data, deadline):
    """Write ``data`` to a pipe, giving up at ``deadline`` (a reader that stopped, or was
    stopped by a process the session kept, must not stall pid 1); the call's own wall clock
    then ends it."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        except OSError:
            return  # the reader is gone: its exit says how
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(int(left * 1000) + 1):
            return


def _exited(pid):
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _reap(pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def kill_all():
    """SIGKILL every process of the session but pid 1 and reap them, until none is left."""
    for _ in range(REAP_ROUNDS):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                return  # no child at all: the namespace holds pid 1 alone
        time.sleep(0.001)
