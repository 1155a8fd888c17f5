"""The resident sandbox process (a zygote): set up isolation once, then fork one tree per execution.

Runs as ``python -I -S -c <this source>`` with an empty environment (the host's
``SANDBOX_ENV`` only) and the kernel's namespaces entered directly (``unshare(2)``,
``mount(2)``, ``pivot_root(2)``, ``mount_setattr(2)`` through ctypes; no bubblewrap,
whose per-execution ``exec`` is exactly the interpreter start this process exists
to avoid). Standard library only.

Once, at start:
  1. ``unshare`` user, mount, network (loopback only, down), ipc and uts namespaces;
     the host writes the uid/gid maps (``0`` -> the host's uid, and, when the host is
     root, ``65534`` -> ``nobody`` so executions drop to a user with no host rights).
  2. Build a new root on a tmpfs holding read-only binds of ``/usr``, ``/bin``,
     ``/lib*``, ``/etc``, the interpreter's prefix and five device nodes, nothing else
     (no ``/home``, ``/root``, ``/run``, ``/var``, ``/work``: no project files, no
     database or Redis sockets), ``pivot_root`` into it and make the whole tree
     read-only, nosuid: with one recursive ``mount_setattr(2)`` where the kernel has it,
     else (gVisor answers ENOSYS, google/gvisor#13175; a seccomp profile may answer
     EPERM) with one ``MS_REMOUNT|MS_BIND|MS_RDONLY`` per mount, then checked mount by
     mount. The ``ready`` message names the mechanism (``readonly_root``).
  3. Import the runtime's common modules and the role's harness, so no execution
     pays for them.

Per execution (a message on the control socket, with its descriptors):
  G = clone() into new mount, pid, ipc and uts namespaces (pid 1 of its own pid
  namespace, no intermediate process): mount a fresh size-capped tmpfs on ``/tmp``
  (the workspace) and ``/dev/shm`` and its own ``/proc`` (it was born in the
  zygote's cgroup, if any), set rlimits, drop to the sandbox user with no
  capabilities and ``no_new_privs``, point fds 0-2 at the host's pipes and fds
  3.. at the role's, then (for a runtime that is not Python) ``execve`` its
  interpreter (``"exec"``), or block reading its job on fd 3: the host boots trees
  ahead of their executions (``pairs.py``). With the job: lower the rlimits to the
  execution's, write the workspace files and run the role's ``main(spec)`` (the
  job's ``"role"`` when it names another harness loaded in this zygote).
  G reports the end of its setup on a pipe only it holds until then (closed before
  any of the submission runs): ``ok``, or the step that failed. The zygote answers
  G's pid, or the failed step (``{"error", "setup": true}``: the sandbox could not be
  built, an ``infra_error``, never the submission's doing), waits for G and writes
  its wait status and rusage on the exit pipe. When G exits or the host kills it (timeout, output
  flood), the kernel kills everything left in its pid namespace; G has
  ``PDEATHSIG=SIGKILL``, so it also dies with the zygote.

Protocol (control socket, one JSON object per ``sendmsg`` with SCM_RIGHTS fds):
  host -> zygote ``{"op": "config", "role", "sources": {name: src}, "sandbox_uid"}``
  then per execution ``{"op": "run", "fds": [names], "role_fds", "limits", "exec"}``, or
  (the session zygote: config ``"store"``) per session ``{"op": "session", "fds":
  ["control"], "workspace", "limits"}``, whose init lives until the session closes
  (``session_init.py``); zygote -> host ``{"unshared": true}``, ``{"ready": true,
  "readonly_root"}``, ``{"pid": G}`` (or ``{"error", "setup": true}``). A step of the
  zygote's own isolation the kernel refuses is answered ``{"error", "stage"}`` in place of
  ``unshared`` or ``ready`` (``stage``: ``namespaces``, ``identity`` or ``root``), and the
  zygote exits.
"""

import array
import ctypes
import errno
import fcntl
import gc
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
SYS_CLONE, SYS_PIVOT_ROOT, SYS_MOUNT_SETATTR = 56, 155, 442  # x86_64
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 1, 38, 24
SETUP_TIMEOUT_S = 30.0  # a tree's namespaces, mounts and identity take milliseconds
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
NEW_ROOT = "/tmp"
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
# Loaded once here, so executions that use them do not pay for the import: the modules
# coding tasks import most. Each one also enlarges the heap every fork copies (a wider
# set -- decimal, statistics, unittest -- measured 8 % slower over HumanEval).
WARM_MODULES = ("collections", "functools", "itertools", "math", "re", "string", "typing")

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
python_libc = ctypes.PyDLL(None, use_errno=True)  # calls that keep the GIL held
python_libc.syscall.restype = ctypes.c_long
pythonapi = ctypes.pythonapi


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags):
    _check(libc.unshare(flags), "unshare")


def mount(source, target, fstype, flags, data=None):
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def make_tree_read_only():
    """Make every mount of this mount namespace read-only and nosuid.

    Returns:
        ``"mount_setattr"``: one recursive ``mount_setattr(2)`` did it (atomic, every
        mount, the kernel's own walk); ``"remount"``: that syscall is not available
        here (ENOSYS under gVisor, google/gvisor#13175; EPERM from a seccomp profile
        that does not know it) and :func:`remount_each_read_only` did it instead.

    Raises:
        OSError: the tree could not be made read-only (the zygote then refuses to start).
    """
    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    ret = libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    if ret == 0:
        return "mount_setattr"
    err = ctypes.get_errno()
    if err not in (errno.ENOSYS, errno.EPERM):
        raise OSError(err, f"mount_setattr /: {os.strerror(err)}")
    # Safe to fall back on either answer: the fallback checks its result mount by mount
    # and fails where it could not make one read-only (an EPERM that means "no
    # CAP_SYS_ADMIN here" fails the same way in mount(2)).
    remount_each_read_only()
    return "remount"


def _unescape_mountinfo(field):
    """A mountinfo path: the kernel writes space, tab, newline and backslash as ``\\ooo``."""
    raw = field.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        code = raw[i + 1 : i + 4]
        if (
            raw[i] == 0x5C and len(code) == 3 and all(48 <= c <= 55 for c in code)
        ):  # \ and three octal digits
            out.append(int(code, 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def mount_points():
    """The mount points of this mount namespace, from ``/proc/self/mountinfo``, in its
    order (parents before their children), each once."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            point = _unescape_mountinfo(line.split()[4])
            if point not in points:
                points.append(point)
    return points


def remount_each_read_only(under=None):
    """The fallback of :func:`make_tree_read_only`: ``MS_REMOUNT|MS_BIND|MS_RDONLY|MS_NOSUID``
    on every mount reachable by path (``under``: at or below that path only), then a check that
    each one reads back read-only and nosuid (``statvfs``: the flags of the mount an execution
    would reach there).

    A bind remount replaces the mount's nodev and noexec flags with those it is given:
    each mount's own are passed again (the kernel refuses, EPERM, to clear a flag that
    was locked when the mount was copied into this user namespace, and clearing one
    would also widen what an execution may do). No atime flag is passed: the kernel
    then keeps the mount's own (also a locked flag). A mount hidden under another at
    the same path is not reachable by path, by this process or by any execution.

    Raises:
        OSError: a remount was refused, or a mount still reads back writable or suid.
    """
    points = [p for p in mount_points() if under is None or p == under or p.startswith(under + "/")]
    for point in points:
        try:
            current = os.statvfs(point).f_flag
        except FileNotFoundError:
            continue  # under a mount that covers its parent: unreachable
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        flags |= (MS_NODEV if current & os.ST_NODEV else 0) | (
            MS_NOEXEC if current & os.ST_NOEXEC else 0
        )
        mount(None, point, None, flags)
    wanted = os.ST_RDONLY | os.ST_NOSUID
    for point in points:
        try:
            current = os.statvfs(point).f_flag
        except FileNotFoundError:
            continue
        if current & wanted != wanted:
            raise OSError(
                errno.EPERM,
                f"remount left {point} {'writable' if not current & os.ST_RDONLY else 'suid'}",
            )


def _bind(host_path, inside):
    if os.path.isdir(host_path):
        os.makedirs(inside, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        open(inside, "w").close()
    mount(host_path, inside, None, MS_BIND | MS_REC)


def build_root(extra_dirs, store=None, system_root="", mounts=()):
    """Pivot into a tmpfs that holds read-only binds of the system and nothing else.

    ``store`` (the session zygote's only): a host directory of materialised workspaces,
    bound read-only at ``/.store``, with an empty ``/workspace`` to mount a session's
    overlay on. Each session detaches ``/.store`` from its own mount namespace before any
    of its processes runs (``session_init.py``).

    ``system_root``: a host directory whose ``usr``, ``bin``, ``lib*`` and ``etc`` are bound in
    place of the host's (an environment's Debian root); empty: the host's own.
    ``mounts``: ``[host directory, path inside]`` pairs bound read-only besides (an
    environment's packages at ``/env``); held open before anything is mounted, since they
    may live under ``/tmp``.

    Returns:
        how the tree was made read-only (see :func:`make_tree_read_only`).
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Held open before the new root covers /tmp: the store may live under it.
    store_fd = os.open(store, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) if store else None
    held = [
        (os.open(host, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), inside)
        for host, inside in mounts
    ]
    root_fd = (
        os.open(system_root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) if system_root else None
    )
    mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    base = f"/proc/self/fd/{root_fd}" if root_fd is not None else ""
    for name in SYSTEM_DIRS:
        host = base + "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), NEW_ROOT + "/" + name)
        elif os.path.isdir(host):
            _bind(host, NEW_ROOT + "/" + name)
    if root_fd is not None:
        os.close(root_fd)
    for host in extra_dirs:  # an interpreter prefix outside /usr (pyenv, a venv's base)
        if os.path.isdir(host) and not os.path.exists(NEW_ROOT + host):
            _bind(host, NEW_ROOT + host)
    for fd, inside in held:
        os.makedirs(NEW_ROOT + inside)
        mount(f"/proc/self/fd/{fd}", NEW_ROOT + inside, None, MS_BIND | MS_REC)
        os.close(fd)
    os.makedirs(NEW_ROOT + "/tmp")
    os.makedirs(NEW_ROOT + "/dev/shm")
    if store_fd is not None:
        os.makedirs(NEW_ROOT + "/.store")
        mount(f"/proc/self/fd/{store_fd}", NEW_ROOT + "/.store", None, MS_BIND)
        os.close(store_fd)
        os.makedirs(NEW_ROOT + "/workspace")
    for name in DEVICES:
        _bind("/dev/" + name, NEW_ROOT + "/dev/" + name)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, NEW_ROOT + "/dev/" + name)
    # A fully visible procfs must exist in this mount namespace for a pid namespace's
    # init to mount its own; each execution mounts one over this bind.
    _bind("/proc", NEW_ROOT + "/proc")
    os.makedirs(NEW_ROOT + "/.old")
    _check(
        0
        if libc.syscall(SYS_PIVOT_ROOT, NEW_ROOT.encode(), (NEW_ROOT + "/.old").encode()) == 0
        else -1,
        "pivot_root",
    )
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    return make_tree_read_only()


def enter_environment(config):
    """Point this interpreter at what the new root holds: an interpreter started from an
    environment's root on the host (``system_root``) found its standard library under that
    host path, which is now ``/``; an environment's packages (``python_path``) go on
    ``sys.path`` after the standard library; ``environ`` adds variables every execution sees
    (``NODE_PATH``, thread caps of numerical libraries)."""
    prefix = config.get("system_root", "")
    if prefix:
        sys.path[:] = [p[len(prefix) :] if p.startswith(prefix + "/") else p for p in sys.path]
        # Packages imported before the pivot (``encodings``) find their submodules through
        # ``__path__``: without this, the first ``"ascii"`` codec looked up afterwards fails.
        for module in list(sys.modules.values()):
            path = getattr(module, "__path__", None)
            if isinstance(path, list):
                path[:] = [p[len(prefix) :] if p.startswith(prefix + "/") else p for p in path]
        for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix", "executable"):
            value = getattr(sys, name, "")
            if value.startswith(prefix + "/"):
                setattr(sys, name, value[len(prefix) :])
        sys.path_importer_cache.clear()
    sys.path.extend(config.get("python_path", []))
    os.environ.update(config.get("environ", {}))


def drop_capabilities():
    """Empty the bounding set and every capability set (for a sandbox user mapped to uid 0)."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    data = (Data * 2)()
    _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


def recv_message(sock):
    fds = array.array("i")
    data, ancdata, _flags, _addr = sock.recvmsg(1 << 22, socket.CMSG_LEN(64 * fds.itemsize))
    if not data:
        return None, []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return json.loads(data), list(fds)


def send_message(sock, message):
    sock.sendall(json.dumps(message).encode())


def _write_exit(fd, status, usage):
    report = {
        "status": status,
        "utime": usage.ru_utime,
        "stime": usage.ru_stime,
        "maxrss_kb": usage.ru_maxrss,
    }
    os.write(fd, json.dumps(report).encode())


def fork_into_namespaces(flags):
    """``fork()`` that puts the child straight into new namespaces (``clone(2)`` with
    ``flags``): the child is pid 1 of a new pid namespace without an intermediate
    process. The interpreter's own fork hooks run around it, as in ``os.fork``; the
    syscall goes through ``PyDLL`` so the GIL stays held across it.

    Returns:
        0 in the child, the child's pid in the parent.
    """
    pythonapi.PyOS_BeforeFork()
    pid = python_libc.syscall(SYS_CLONE, ctypes.c_ulong(flags | signal.SIGCHLD), 0, 0, 0, 0)
    if pid == 0:
        pythonapi.PyOS_AfterFork_Child()
        return 0
    pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(ctypes.get_errno(), f"clone: {os.strerror(ctypes.get_errno())}")
    return pid


def describe(exc):
    """An exception as one line for the host: the failed step and the kernel's answer."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}"


def run_tree(request, fds, config, roles):
    """Fork G into fresh namespaces and wait for the end of its setup.

    Returns:
        ``(G's pid, exit fd, alive fd)`` once G is set up, or ``(None, reason)`` when its
        setup failed (G is reaped then). Only in the zygote; G never returns.

    Raises:
        OSError: ``clone`` was refused.
    """
    named = dict(zip(request["fds"], fds))
    exit_fd = named["exit"]
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if request.get("netns"):
        # A socket sent into its own queue outlives every process: in a network namespace
        # shared with the next execution its abstract name would carry messages across.
        flags |= CLONE_NEWNET
    child, alive_w, setup_r = clone_child(
        flags,
        lambda parent_alive, setup: run_init(
            request, named, config, roles, parent_alive=parent_alive, setup=setup
        ),
    )
    for fd in fds:
        if fd != exit_fd:
            os.close(fd)
    failure = wait_for_setup(setup_r)
    if failure is not None:
        _kill_quietly(child)
        os.wait4(child, 0)
        for fd in (exit_fd, alive_w):
            os.close(fd)
        return None, failure
    return child, exit_fd, alive_w


def clone_child(flags, main):
    """Clone a child straight into new namespaces (``flags``) with two pipes: one whose write
    end only we hold (the child's ``parent_alive``: EOF there means we died before it armed
    PDEATHSIG, since it cannot see our pid from inside its pid namespace), and one whose write
    end only it holds until the end of its setup (``setup["fd"]``): ``ok``, or the failed step,
    closed before anything it was started for runs, so nothing that runs later can make its
    own failure read as the sandbox's. The child runs ``main(parent_alive, setup)`` and exits.

    Returns:
        ``(pid, alive_w, setup_r)`` in the zygote: keep ``alive_w`` open while the child must
        know we live; read ``setup_r`` with :func:`wait_for_setup`.

    Raises:
        OSError: ``clone`` was refused.
    """
    alive_r, alive_w = os.pipe()
    setup_r, setup_w = os.pipe()
    for target in (sys.stdout, sys.stderr):
        target.flush()
    try:
        child = fork_into_namespaces(flags)
    except OSError:
        for fd in (alive_r, alive_w, setup_r, setup_w):
            os.close(fd)
        raise
    if child == 0:
        setup = {"fd": setup_w}
        try:
            os.close(alive_w)
            os.close(setup_r)
            main(alive_r, setup)
        except BaseException as exc:  # noqa: BLE001 - reported, never raised out of the child
            if setup["fd"] is not None:  # still setting up: the zygote reports it to the host
                _write_quietly(setup["fd"], describe(exc).encode()[:2000])
            else:  # after setup (the job, the workspace files): the child's own stderr
                _write_quietly(
                    2, f"sandbox failed before the program ran: {describe(exc)}\n".encode()
                )
        finally:
            os._exit(120)
    os.close(alive_r)
    os.close(setup_w)
    return child, alive_w, setup_r


def wait_for_setup(setup_r):
    """Read G's setup report to its end. Returns None when G is set up, else the reason."""
    report = b""
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    try:
        while True:
            ready = select.select([setup_r], [], [], max(0.0, deadline - time.monotonic()))[0]
            if not ready:
                return f"the execution's setup took more than {int(SETUP_TIMEOUT_S)} s"
            chunk = os.read(setup_r, 4096)
            if not chunk:
                break
            report += chunk
    finally:
        os.close(setup_r)
    if report == b"ok":
        return None
    return report.decode("utf-8", "replace") or "the execution's init exited during its setup"


def _write_quietly(fd, data):
    try:
        os.write(fd, data)
    except OSError:
        pass


def _kill_quietly(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def finish_tree(child, exit_fd, alive_w):
    """Wait for G (the host kills it on a timeout), write its report, reap its orphans."""
    _pid, status, usage = os.wait4(child, 0)
    os.close(alive_w)
    try:
        _write_exit(exit_fd, status, usage)
    except OSError:
        pass  # the host stopped listening (it gave up on this tree)
    os.close(exit_fd)
    while True:  # processes reparented to us (we are a subreaper) when their init died
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def run_init(request, named, config, roles, parent_alive, setup):
    """In G, pid 1 of the execution's pid namespace: limits, identity, then the role.

    ``setup["fd"]`` is the setup pipe (see :func:`run_tree`): ``ok`` is written and it is
    closed (``setup["fd"] = None``) once everything up to the job is in place.
    """
    # Out of the way of the descriptors placed at 0.. below, and never inherited.
    low = setup["fd"]
    setup["fd"] = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 1024)
    os.close(low)
    limits = request["limits"]
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    inodes = int(limits.get("tmp_inodes") or 4096)
    tmp_size = f"size={int(limits['file_size_bytes'])},mode=1777,nr_inodes={inodes}"
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_size)
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp_size)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    oom_first()  # the OOM killer's first choice in the cgroup is the execution, not the zygote
    libc.sethostname(b"sandbox", 7)
    if request.get("loopback"):  # its own network namespace's lo, up while it still may
        loopback_up()
    uid = config["sandbox_uid"]
    if limits.get("address_space_bytes"):
        cap_limit(resource.RLIMIT_AS, limits["address_space_bytes"], limits["address_space_bytes"])
    cap_limit(resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1)
    cap_limit(resource.RLIMIT_FSIZE, limits["file_size_bytes"], limits["file_size_bytes"])
    cap_limit(resource.RLIMIT_CORE, 0, 0)
    if uid != 0:
        cap_limit(resource.RLIMIT_NPROC, limits["processes"], limits["processes"])
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # leaves uid 0: every capability is gone
    else:
        drop_capabilities()
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # Armed after the uid change (which clears it); the pipe closes the race with the
    # zygote's death.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if select.select([parent_alive], [], [], 0)[0]:  # EOF: the zygote is already gone
        os._exit(121)
    install_seccomp(config["seccomp"])
    # fds 0-2 and the role's descriptors 3.. in a fixed order; nothing else survives.
    role_fds = request["role_fds"]
    targets = {"stdin": 0, "stdout": 1, "stderr": 2}
    for index, name in enumerate(role_fds):
        targets[name] = 3 + index
    moved = {}
    for name, target in targets.items():  # first out of the way (>= 1024), then into place
        source = os.open("/dev/null", os.O_RDONLY) if name == "stdin" else named[name]
        moved[target] = fcntl.fcntl(source, fcntl.F_DUPFD, 1024)
    for target, fd in moved.items():
        os.dup2(fd, target)
    os.closerange(3 + len(role_fds), setup["fd"])
    os.closerange(setup["fd"] + 1, 1 << 16)
    cap_limit(resource.RLIMIT_NOFILE, 256, 256)
    for target in moved:  # dup2 clears close-on-exec on the target; keep them inheritable
        os.set_inheritable(target, True)
    workspace = "/tmp/workspace"
    os.mkdir(workspace, 0o755)
    os.chdir(workspace)
    os.environ["HOME"] = workspace
    os.write(setup["fd"], b"ok")  # set up: from here on, a failure is the tree's own
    os.close(setup["fd"])
    setup["fd"] = None
    if request.get("exec"):  # another runtime's interpreter (Node.js), isolated the same way
        argv = request["exec"]
        os.execve(argv[0], argv, dict(os.environ))
    # Booted ahead of its execution: block here until the host hands over the job.
    job = json.loads(read_all(3))
    os.close(3)
    lower_limits(job["limits"])
    for rel, text in job.get("files", {}).items():
        path = os.path.join(workspace, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_file(path, text)
    # sys.stdin/stdout/stderr are the zygote's (see main): fds 0-2 are this tree's now.
    code = 0
    try:
        roles[job.get("role") or config["role"]](job["spec"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the role's own crash is reported by its exit status
        # Only a crashing role needs it: not loaded ahead, so not in the heap every fork shares.
        import traceback  # noqa: PLC0415 (a crash's alone; the zygote's heap stays lean)

        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40


def loopback_up():
    """Bring ``lo`` up in this process's network namespace (a tree with a network namespace of
    its own, before it drops its capabilities: a sandboxed build's proxy listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING, b"")
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, request)


def oom_first():
    """Make this process the OOM killer's first choice (``oom_score_adj`` 1000; a process may
    always raise its own). ``os.open``, not ``open()``: a text file's first use costs a fresh
    process ~0.15 ms."""
    try:
        adj = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(adj, b"1000")
        finally:
            os.close(adj)
    except OSError:
        pass


def write_file(path, text):
    """Write ``text`` as UTF-8 (what ``open(path, "w", encoding="utf-8")`` writes on Linux,
    without the text layer a fresh process pays ~0.15 ms to set up)."""
    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def standard_streams():
    """``sys.stdin``/``stdout``/``stderr`` on fds 0-2, made once here for every tree: a tree
    puts its own descriptors on 0-2 and keeps these objects (the zygote flushes them
    before each fork, so no tree inherits buffered output). Made in each tree they cost
    ~0.3 ms of a fresh process."""
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def cap_limit(kind, soft, hard):
    """Set an rlimit, never above what it already is (the host may have lowered it first)."""
    current_soft, current_hard = resource.getrlimit(kind)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    if current_soft != resource.RLIM_INFINITY:
        soft = min(soft, current_soft)
    resource.setrlimit(kind, (min(soft, hard), hard))


def build_seccomp_filter():
    """Build a seccomp filter (classic BPF, x86_64) refusing what a sandbox never needs and
    what would let executions of one zygote talk or widen the kernel's surface:
    the key management syscalls (a keyring outlives its execution), io_uring, new user
    namespaces (``clone``/``unshare`` with CLONE_NEWUSER; ``clone3`` answers ENOSYS so
    the C library falls back to ``clone``), and any non-x86_64 or x32 syscall.
    """
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    errno_eperm, errno_enosys = 0x00050000 | 1, 0x00050000 | 38
    arch_x86_64, x32_bit = 0xC000003E, 0x40000000
    nr_clone, nr_unshare, nr_add_key, nr_request_key, nr_keyctl, nr_clone3 = (
        56,
        272,
        248,
        249,
        250,
        435,
    )
    nr_io_uring_setup, nr_io_uring_enter, nr_io_uring_register = 425, 426, 427
    program = [
        (ld_w_abs, 0, 0, 4),  # arch
        (jeq_k, 1, 0, arch_x86_64),
        (ret_k, 0, 0, kill),
        (ld_w_abs, 0, 0, 0),  # syscall number
        (jset_k, 0, 1, x32_bit),
        (ret_k, 0, 0, kill),
        (jeq_k, 0, 1, nr_add_key),
        (ret_k, 0, 0, errno_eperm),
        (jeq_k, 0, 1, nr_request_key),
        (ret_k, 0, 0, errno_eperm),
        (jeq_k, 0, 1, nr_keyctl),
        (ret_k, 0, 0, errno_eperm),
        (jeq_k, 0, 1, nr_clone3),
        (ret_k, 0, 0, errno_enosys),
        (jeq_k, 2, 0, nr_io_uring_setup),  # io_uring: a large kernel surface no task needs
        (jeq_k, 1, 0, nr_io_uring_enter),
        (jeq_k, 0, 1, nr_io_uring_register),
        (ret_k, 0, 0, errno_eperm),
        (jeq_k, 1, 0, nr_clone),
        (jeq_k, 0, 3, nr_unshare),
        (ld_w_abs, 0, 0, 16),  # first argument, low 32 bits: the flags
        (jset_k, 0, 1, CLONE_NEWUSER),
        (ret_k, 0, 0, errno_eperm),
        (ret_k, 0, 0, allow),
    ]

    class SockFilter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*insn) for insn in program])
    return SockFprog(len(program), filters), filters  # keep the array alive with the program


def install_seccomp(compiled):
    """Load the filter :func:`build_seccomp_filter` made (once, in the zygote)."""
    _check(
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(compiled[0]), 0, 0), "seccomp"
    )


def read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def lower_limits(limits):
    """Bring the boot-time rlimits down to the execution's (a process may only lower them).

    A limit that is unlimited at boot on purpose (the process count when the sandbox
    user is the host's own user) stays so.
    """
    for kind, key in (
        (resource.RLIMIT_CPU, "cpu_s"),
        (resource.RLIMIT_FSIZE, "file_size_bytes"),
        (resource.RLIMIT_AS, "address_space_bytes"),
        (resource.RLIMIT_NPROC, "processes"),
    ):
        value = limits.get(key)
        _soft, hard = resource.getrlimit(kind)
        if not value or hard == resource.RLIM_INFINITY:
            continue
        extra = (
            1 if kind == resource.RLIMIT_CPU else 0
        )  # SIGXCPU at the soft limit, SIGKILL at the hard
        new_hard = min(value + extra, hard)
        resource.setrlimit(kind, (min(value, new_hard), new_hard))


LIBRARIES = ("plaindata", "session_files")  # sources whose names every role sees


def load_roles(sources):
    """Each harness source runs as its own module; its ``main(spec)`` is a role.

    The sources named in :data:`LIBRARIES` are loaded first into one namespace that every
    role starts from; every role also gets ``zygote``, this module (the session's init
    uses its mount, identity and seccomp helpers).
    """
    roles = {}
    shared = {}
    for name in LIBRARIES:
        if name in sources:
            exec(compile(sources[name], f"<{name}>", "exec"), shared)
    for name, source in sources.items():
        if name in LIBRARIES:
            continue
        namespace = dict(shared, __name__="crucible_" + name, zygote=sys.modules[__name__])
        exec(compile(source, f"<{name}>", "exec"), namespace)
        roles[name] = namespace["main"]
    return roles


def run_session(request, fds, config, roles):
    """Clone one session's init into new mount, pid, network, ipc and uts namespaces and
    wait for the end of its setup (``session_init.py``); the zygote does not wait for it
    to exit (its SIGCHLD handler reaps it).

    Returns:
        ``(pid, None)`` once it is set up, or ``(None, reason)`` when its setup failed.

    Raises:
        OSError: ``clone`` was refused.
    """
    named = dict(zip(request["fds"], fds, strict=True))
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    try:
        child, alive_w, setup_r = clone_child(
            flags,
            lambda parent_alive, setup: roles["session"](
                request, named, config, parent_alive, setup
            ),
        )
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    for fd in fds:
        os.close(fd)
    failure = wait_for_setup(setup_r)
    os.close(alive_w)  # set up: PDEATHSIG is armed, the pipe has done its job
    if failure is not None:
        _kill_quietly(child)
        try:
            os.waitpid(child, 0)
        except ChildProcessError:
            pass  # reaped by the SIGCHLD handler already
        return None, failure
    return child, None


def reap_children(_signum=None, _frame=None):
    """Reap every exited child now, without waiting: the session zygote's SIGCHLD handler (a
    session init's zombie would hold its pid and its cgroup until the next request), and a
    session init's reaping of the processes its calls kept."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def refuse(control, stage, exc):
    """Tell the host which step of the isolation the kernel refused, and exit (no traceback:
    the host turns this into one clear error)."""
    try:
        send_message(control, {"error": describe(exc), "stage": stage})
    finally:
        os._exit(1)


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    except OSError as exc:
        refuse(control, "namespaces", exc)
    send_message(control, {"unshared": True})
    config, _ = recv_message(control)  # sent once the host has written the id maps
    if config is None:
        os._exit(0)
    try:
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    except OSError as exc:
        refuse(control, "identity", exc)
    # Die with the worker that started us (after the uid change, which would clear it).
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(sys.argv[2]):
        os._exit(0)
    try:
        readonly_root = build_root(
            config.get("bind_dirs", []),
            config.get("store"),
            config.get("system_root", ""),
            config.get("mounts", []),
        )
    except OSError as exc:
        refuse(control, "root", exc)
    enter_environment(config)
    standard_streams()
    for name in WARM_MODULES:
        __import__(name)
    roles = load_roles(config["sources"])
    config["seccomp"] = build_seccomp_filter()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Everything loaded so far is shared with every fork: keep the collector from
    # scanning it (and so from writing to, and copying, its pages in each child).
    gc.collect()
    gc.freeze()
    # And hand the heap's free chunks (the parser's and the loaders' leftovers) back to the
    # kernel: a fork that reused them would copy each page it writes (copy-on-write), so a
    # call's CPU time would depend on where those holes happen to lie, not only on the
    # memory it touches (the efficiency reward times calls of tens of microseconds).
    try:
        libc.malloc_trim(0)
    except AttributeError:  # a C library without malloc_trim (musl): nothing to hand back
        pass
    if config.get("store"):  # the session zygote: its children are long-lived session inits
        signal.signal(signal.SIGCHLD, reap_children)
    send_message(control, {"ready": True, "readonly_root": readonly_root})
    while True:
        request, fds = recv_message(control)
        if request is None:
            os._exit(0)
        if request.get("op") == "session":
            try:
                pid, failure = run_session(request, fds, config, roles)
            except OSError as exc:
                send_message(control, {"error": f"clone: {describe(exc)}", "setup": True})
                continue
            send_message(control, {"pid": pid} if pid else {"error": failure, "setup": True})
            continue
        if request.get("op") == "run":
            try:
                started = run_tree(request, fds, config, roles)
            except OSError as exc:  # clone refused (limits of the host): this request fails
                for fd in fds:
                    os.close(fd)
                send_message(control, {"error": f"clone: {describe(exc)}", "setup": True})
                continue
            if started[0] is None:  # the tree could not be set up: nothing of the job ran
                send_message(control, {"error": started[1], "setup": True})
                continue
            send_message(control, {"pid": started[0]})
            finish_tree(*started)


if __name__ == "__main__":
    main()
