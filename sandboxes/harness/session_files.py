"""File operations on a session's workspace, without a shell: read, write, list, diff, changes.

Loaded into the session zygote as a library (beside ``session_init.py``) and run inside
a session, in a child that has already dropped to the sandbox user with no capabilities,
``no_new_privs`` and the seccomp filter. Also importable on the host (standard library
only), which is how its path rules are unit-tested.

Paths are relative to the workspace (``/workspace/x`` is accepted as ``x``). Every path a
caller gives is opened with ``openat2(2)`` and ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV`` from a descriptor of the workspace: a ``..`` or a symbolic link that
would leave the workspace, or a ``/proc`` magic link, is refused by the kernel (EXDEV,
ELOOP), whatever the link says. Where ``openat2`` is missing (ENOSYS: older kernels,
some gVisor versions) each component is opened in turn with ``O_NOFOLLOW`` instead, and
``..`` and every symbolic link are refused. Walks (list, diff) never follow a link.

The starting point of the diff is the session's lower layer: the workspace as it was
materialised, read through a descriptor the session init opened before the layer's host
path left its mount namespace. A file is compared by content unless its size, mtime and
ctime all equal the lower file's (the ctime of a file cannot be set by a user: a file the
session changed always has a later one).

Each operation returns a JSON-able dict; refused input raises :class:`FileOpError`
(``kind``: ``invalid``, ``not_found``, ``outside``, ``not_a_file``, ``too_large``,
``exists``), which the session reports as the caller's error, never as the sandbox's.
"""

import base64
import ctypes
import difflib
import errno
import hashlib
import os
import stat

SYS_OPENAT2 = 437  # x86_64
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH = 0x01, 0x02, 0x08
WORKSPACE_PREFIX = "/workspace/"
MAX_PATH_CHARS = 4096
MAX_WALK_ENTRIES = 200_000
DIFF_FILE_MAX_BYTES = 1 << 20  # larger files are named in a diff, not diffed line by line

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_missing = []  # set once openat2 answered ENOSYS: use the component walk from then on


class OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


class FileOpError(Exception):
    """A file operation refused for its input: ``kind`` (see the module) and ``detail``."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def clean_path(path, *, allow_root=True):
    """The workspace-relative form of ``path``: a ``str`` without NUL, relative, or under
    ``/workspace/``. ``""``/``"."`` is the workspace itself (when ``allow_root``).

    Raises:
        FileOpError: ``invalid`` (not a string, NUL, too long, empty) or ``outside`` (another
            absolute path).
    """
    if not isinstance(path, str):
        raise FileOpError("invalid", f"a path is a string, not {type(path).__name__}")
    if "\0" in path or len(path) > MAX_PATH_CHARS:
        raise FileOpError("invalid", f"path {path[:100]!r} has a NUL character or is too long")
    if path in ("/workspace", WORKSPACE_PREFIX):
        path = "."
    elif path.startswith(WORKSPACE_PREFIX):
        path = path[len(WORKSPACE_PREFIX) :]
    elif path.startswith("/"):
        raise FileOpError("outside", f"path {path!r} is outside the workspace (/workspace)")
    path = path.strip("/") or "."
    if path == "." and not allow_root:
        raise FileOpError("invalid", "a file path is needed here, not the workspace itself")
    return path


def _error_for(exc, path):
    """A :class:`FileOpError` for what the kernel answered about ``path``, or None."""
    kinds = {
        errno.EXDEV: ("outside", f"path {path!r} leaves the workspace"),
        errno.ELOOP: ("outside", f"path {path!r} goes through a link that is not followed"),
        errno.ENOENT: ("not_found", f"no such file in the workspace: {path!r}"),
        errno.ENOTDIR: ("not_found", f"a component of {path!r} is not a directory"),
        errno.EISDIR: ("not_a_file", f"{path!r} is a directory"),
        errno.EEXIST: ("exists", f"{path!r} exists"),
        errno.ENOSPC: ("too_large", "the workspace is full (its size cap)"),
        errno.EFBIG: ("too_large", "the file is larger than the workspace's file size cap"),
        errno.EDQUOT: ("too_large", "the workspace is full (its size cap)"),
        errno.EACCES: ("invalid", f"permission denied for {path!r}"),
        errno.EPERM: ("invalid", f"operation not permitted on {path!r}"),
        errno.ENAMETOOLONG: ("invalid", f"path {path!r} is too long"),
    }
    if isinstance(exc, OSError) and exc.errno in kinds:
        return FileOpError(*kinds[exc.errno])
    return None


def open_beneath(root_fd, path, flags, mode=0):
    """``openat2(root_fd, path)`` confined to ``root_fd``'s tree (see the module).

    Returns:
        a new descriptor (close-on-exec).

    Raises:
        FileOpError: the path leaves the tree, does not exist, ...
        OSError: anything else the kernel answered.
    """
    flags |= os.O_CLOEXEC
    if not _openat2_missing:
        how = OpenHow(flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
        fd = _libc.syscall(
            SYS_OPENAT2, root_fd, path.encode("utf-8", "surrogateescape"), ctypes.byref(how),
            ctypes.sizeof(how),
        )  # fmt: skip
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err != errno.ENOSYS:
            exc = OSError(err, os.strerror(err))
            raise _error_for(exc, path) or exc
        _openat2_missing.append(True)
    return _open_walking(root_fd, path, flags, mode)


def _open_walking(root_fd, path, flags, mode):
    """The fallback of :func:`open_beneath`: one ``O_NOFOLLOW`` component at a time."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileOpError("outside", f"path {path!r} has a '..' component")
    if not parts:
        return os.open(".", flags, mode, dir_fd=root_fd)
    current = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root_fd)
    try:
        for part in parts[:-1]:
            try:
                step = os.open(
                    part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current
                )
            except OSError as exc:
                raise _error_for(exc, path) or exc from None
            os.close(current)
            current = step
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=current)
        except OSError as exc:
            raise _error_for(exc, path) or exc from None
    finally:
        os.close(current)


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def read_file(root_fd, args):
    """``{"path", "max_bytes"}`` -> ``{"path", "size", "data" (base64), "truncated"}``.

    Regular files only (a FIFO is refused, never waited on)."""
    path = clean_path(args.get("path"), allow_root=False)
    max_bytes = int(args.get("max_bytes", 1 << 20))
    fd = open_beneath(root_fd, path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileOpError("not_a_file", f"{path!r} is not a regular file")
        data = read_upto(fd, max_bytes)
    finally:
        os.close(fd)
    return {
        "path": path,
        "size": info.st_size,
        "data": _b64(data),
        "truncated": info.st_size > len(data),
    }


def _make_parents(root_fd, path):
    parent = ""
    for part in path.split("/")[:-1]:
        parent = parent + "/" + part if parent else part
        try:
            fd = open_beneath(root_fd, parent, os.O_PATH | os.O_DIRECTORY)
            os.close(fd)
            continue
        except FileOpError as exc:
            if exc.kind != "not_found":
                raise
        base, _, name = parent.rpartition("/")
        fd = open_beneath(root_fd, base or ".", os.O_PATH | os.O_DIRECTORY)
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _error_for(exc, parent) or exc from None
        finally:
            os.close(fd)


def write_file(root_fd, args, data):
    """``{"path", "executable", "parents"}`` and the content -> ``{"path", "size"}``.

    Creates or truncates a regular file (missing parent directories too, unless
    ``parents`` is false); a symbolic link inside the workspace is written through."""
    path = clean_path(args.get("path"), allow_root=False)
    if args.get("parents", True):
        _make_parents(root_fd, path)
    mode = 0o755 if args.get("executable") else 0o644
    fd = open_beneath(root_fd, path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileOpError("not_a_file", f"{path!r} is not a regular file")
        try:
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if args.get("executable") is not None:
                os.fchmod(fd, mode)
        except OSError as exc:
            raise _error_for(exc, path) or exc from None
    finally:
        os.close(fd)
    return {"path": path, "size": len(data)}


def _kind(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def walk(dir_fd, limit=MAX_WALK_ENTRIES):
    """Every entry under the open directory ``dir_fd`` (not followed through links):
    ``{relative path: os.stat_result}``, directories included.

    Raises:
        FileOpError: ``too_large`` past ``limit`` entries.
    """
    found = {}
    stack = [("", os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd))]
    try:
        while stack:
            prefix, fd = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    listed = list(entries)
                for entry in listed:
                    rel = prefix + entry.name
                    info = entry.stat(follow_symlinks=False)
                    found[rel] = info
                    if len(found) > limit:
                        raise FileOpError("too_large", f"more than {limit} entries")
                    if stat.S_ISDIR(info.st_mode):
                        child = os.open(
                            entry.name,
                            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd,
                        )
                        stack.append((rel + "/", child))
            finally:
                os.close(fd)
    finally:
        for _prefix, fd in stack:
            os.close(fd)
    return found


def list_dir(root_fd, args):
    """``{"path", "recursive", "max_entries"}`` -> ``{"path", "entries": [{"path", "type",
    "size", "mode"}], "truncated"}``; entry paths are workspace-relative, sorted."""
    path = clean_path(args.get("path", "."))
    max_entries = int(args.get("max_entries", 10_000))
    fd = open_beneath(root_fd, path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if args.get("recursive"):
            found = walk(fd)
        else:
            with os.scandir(fd) as entries:
                found = {e.name: e.stat(follow_symlinks=False) for e in entries}
    finally:
        os.close(fd)
    prefix = "" if path == "." else path + "/"
    names = sorted(found)
    entries = [
        {
            "path": prefix + name,
            "type": _kind(found[name].st_mode),
            "size": found[name].st_size,
            "mode": stat.S_IMODE(found[name].st_mode),
        }
        for name in names[:max_entries]
    ]
    return {"path": path, "entries": entries, "truncated": len(names) > max_entries}


def read_upto(fd, limit):
    """At most ``limit`` bytes from ``fd``, to its end or the limit, whichever comes first."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_at(root_fd, rel, limit):
    fd = os.open(rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=root_fd)
    try:
        return read_upto(fd, limit)
    finally:
        os.close(fd)


def compare(work_fd, lower_fd):
    """What changed in the workspace since its start: ``[(path, change, old_stat, new_stat)]``
    sorted by path, ``change`` one of ``added``, ``deleted``, ``modified``; a path whose
    type changed is ``deleted`` then ``added``. Directories themselves are not listed."""
    before, after = walk(lower_fd), walk(work_fd)
    changes = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        old_kind = _kind(old.st_mode) if old else None
        new_kind = _kind(new.st_mode) if new else None
        if "dir" in (old_kind, new_kind) and old_kind == new_kind:
            continue
        if old_kind != new_kind:
            if old_kind not in (None, "dir"):
                changes.append((path, "deleted", old, None))
            if new_kind not in (None, "dir"):
                changes.append((path, "added", None, new))
            continue
        if _same(work_fd, lower_fd, path, old, new):
            continue
        changes.append((path, "modified", old, new))
    return changes


def _same(work_fd, lower_fd, path, old, new):
    if stat.S_ISLNK(old.st_mode):
        return os.readlink(path, dir_fd=work_fd) == os.readlink(path, dir_fd=lower_fd)
    if stat.S_IMODE(old.st_mode) & 0o111 != stat.S_IMODE(new.st_mode) & 0o111:
        return False
    if old.st_size != new.st_size:
        return False
    if (old.st_mtime_ns, old.st_ctime_ns) == (new.st_mtime_ns, new.st_ctime_ns):
        return True  # not copied up: the lower file itself, which never changes
    if stat.S_IMODE(old.st_mode) != stat.S_IMODE(new.st_mode):
        return False  # re-permissioned: a change a grading and the detectors see
    if not stat.S_ISREG(old.st_mode):
        return True  # a FIFO or socket has no content to compare
    try:
        work = _read_at(work_fd, path, old.st_size + 1)
    except PermissionError:
        return False  # the session made it unreadable to itself: changed
    return work == _read_at(lower_fd, path, old.st_size + 1)


def _content(root_fd, path, info):
    """A file's content for a diff or a snapshot: bytes, or the link target for a symlink."""
    if info is None:
        return b""
    if stat.S_ISLNK(info.st_mode):
        return os.readlink(path, dir_fd=root_fd).encode("utf-8", "surrogateescape")
    if not stat.S_ISREG(info.st_mode):
        return b""
    return _read_at(root_fd, path, info.st_size)


def _text(data):
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def diff(work_fd, lower_fd, args):
    """``{"max_bytes", "context"}`` -> ``{"diff": unified diff text, "changes": [{"path",
    "change"}], "truncated"}``. Text files are diffed line by line (``--- a/p``,
    ``+++ b/p``, ``/dev/null`` for an added or deleted side, as ``git apply`` reads);
    binary files, files over :data:`DIFF_FILE_MAX_BYTES` and other types are named."""
    max_bytes = int(args.get("max_bytes", 1 << 20))
    context = int(args.get("context", 3))
    parts, size, truncated = [], 0, False
    changes = compare(work_fd, lower_fd)
    for path, change, old, new in changes:
        if size >= max_bytes:
            truncated = True
            break
        try:
            piece = _file_diff(work_fd, lower_fd, path, change, old, new, context)
        except PermissionError:
            piece = f"Unreadable file b/{path} (mode {stat.S_IMODE(new.st_mode):o})\n"
        parts.append(piece)
        size += len(piece.encode("utf-8", "replace"))
    text = "".join(parts)
    if len(text.encode("utf-8", "replace")) > max_bytes:
        text = text.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore")
        truncated = True
    return {
        "diff": text,
        "changes": [{"path": path, "change": change} for path, change, _o, _n in changes],
        "truncated": truncated,
    }


def _file_diff(work_fd, lower_fd, path, change, old, new, context):
    a = "a/" + path if old is not None else "/dev/null"
    b = "b/" + path if new is not None else "/dev/null"
    sizes = [s.st_size for s in (old, new) if s is not None]
    if max(sizes) > DIFF_FILE_MAX_BYTES:
        return f"Large files {a} and {b} differ\n"
    before = _text(_content(lower_fd, path, old))
    after = _text(_content(work_fd, path, new))
    links = [s for s in (old, new) if s is not None and stat.S_ISLNK(s.st_mode)]
    if links:  # a link's content is its target, as git shows it
        before = f"symlink -> {before}\n" if old is not None else ""
        after = f"symlink -> {after}\n" if new is not None else ""
    if before is None or after is None:
        return f"Binary files {a} and {b} differ\n"
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), a, b, n=context
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if not out:  # same text, another mode
        return f"Mode of {b} changed\n"
    return "".join(out)


def changes(work_fd, lower_fd, args):
    """``{"max_bytes"}`` -> what grading needs to rebuild the final workspace from the
    starting one: ``{"files": {path: base64}, "executable": [paths], "symlinks": {path:
    target}, "deleted": [paths], "bytes"}``.

    Raises:
        FileOpError: ``too_large`` when the changed files hold more than ``max_bytes``
            (grading never gets a truncated workspace).
    """
    max_bytes = int(args.get("max_bytes", 64 << 20))
    files, executable, symlinks, deleted, total = {}, [], {}, [], 0
    for path, change, _old, new in compare(work_fd, lower_fd):
        if change == "deleted":
            if path not in files and path not in symlinks:
                deleted.append(path)
            continue
        if stat.S_ISLNK(new.st_mode):
            symlinks[path] = os.readlink(path, dir_fd=work_fd)
            continue
        if not stat.S_ISREG(new.st_mode):
            continue  # FIFOs and sockets carry nothing to grade
        total += new.st_size
        if total > max_bytes:
            raise FileOpError("too_large", f"the changed files hold more than {max_bytes} bytes")
        try:
            files[path] = _b64(_content(work_fd, path, new))
        except PermissionError:
            raise FileOpError(
                "unreadable", f"{path} cannot be read (mode {stat.S_IMODE(new.st_mode):o})"
            ) from None
        if new.st_mode & 0o111:
            executable.append(path)
        if path in deleted:
            deleted.remove(path)
    return {
        "files": files,
        "executable": executable,
        "symlinks": symlinks,
        "deleted": deleted,
        "bytes": total,
    }


def state(work_fd, lower_fd, args):
    """``{}`` -> ``{"changes": {path: [change, mode, sha256 or None]}}``: every path that
    differs from the start (added, deleted, modified, re-permissioned; a link's target hashed),
    with its mode and content digest now (None for a deleted or unreadable file), so two
    states taken turn by turn tell what each turn did to the workspace."""
    found = {}
    for path, change, _old, new in compare(work_fd, lower_fd):
        if new is None:
            found[path] = [change, None, None]
            continue
        try:
            digest = hashlib.sha256(_content(work_fd, path, new)).hexdigest()
        except (PermissionError, OSError):
            digest = None
        found[path] = [change, stat.S_IMODE(new.st_mode), digest]
    return {"changes": found, "network": network_counters()}


def network_counters():
    """Counters of the session's own network namespace (``/proc/net/snmp`` and ``snmp6``):
    ``no_route``, packets that could not leave for want of a route (the session has none but
    loopback: every DNS lookup or connection out counts), and ``udp_no_port``, datagrams to a
    local port nothing listens on (a resolver on 127.0.0.1 that is not there)."""
    found = {"no_route": 0, "udp_no_port": 0}
    try:
        with open("/proc/net/snmp", encoding="ascii") as handle:
            rows = [line.split() for line in handle]
        for names, values in zip(rows[::2], rows[1::2], strict=False):
            table = dict(zip(names[1:], values[1:], strict=False))
            if names[0] == "Ip:":
                found["no_route"] += int(table.get("OutNoRoutes", 0))
            elif names[0] == "Udp:":
                found["udp_no_port"] += int(table.get("NoPorts", 0))
        with open("/proc/net/snmp6", encoding="ascii") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) == 2 and parts[0] == "Ip6OutNoRoutes":
                    found["no_route"] += int(parts[1])
                elif len(parts) == 2 and parts[0] == "Udp6NoPorts":
                    found["udp_no_port"] += int(parts[1])
    except (OSError, ValueError):
        pass
    return found


def run_file_op(op, args, data, work_fd, lower_fd):
    """Dispatch one operation. ``data`` is the content of a ``write``.

    Returns:
        ``{"ok": result}`` or ``{"error": {"kind", "detail"}}`` for a refused input.
    """
    try:
        if op == "read":
            result = read_file(work_fd, args)
        elif op == "write":
            result = write_file(work_fd, args, data)
        elif op == "list":
            result = list_dir(work_fd, args)
        elif op == "diff":
            result = diff(work_fd, lower_fd, args)
        elif op == "changes":
            result = changes(work_fd, lower_fd, args)
        elif op == "state":
            result = state(work_fd, lower_fd, args)
        else:
            raise FileOpError("invalid", f"unknown file operation {op!r}")
    except FileOpError as exc:
        return {"error": {"kind": exc.kind, "detail": exc.detail}}
    except (TypeError, ValueError) as exc:
        return {"error": {"kind": "invalid", "detail": str(exc)[:500]}}
    return {"ok": result}
