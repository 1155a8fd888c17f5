"""Run a build command as root of a user namespace whose ids are unprivileged on the host.

Debian's maintainer scripts (a package's ``postinst``: shell code from outside) must never run
as the host's root. :func:`run_as_namespace_root` starts a command in new user, mount and pid
namespaces where uid and gid 0..65535 are the host's ``BUILD_ID_BASE``.. ``+65535``: ids no
host account holds. Inside, the command is root (it may ``chroot``, ``chown`` to any of those
ids, mount ``proc``), and every file it writes belongs on the host to an unprivileged id; on
the host it can do nothing an unprivileged user could not. The network namespace is the
host's: the build downloads from Debian's archive.

The maps are written by this (root) process, as ``newuidmap`` would, so no ``/etc/subuid``
entry is needed. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import IO

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
BUILD_ID_BASE = 1_450_000_000  # far above any account or container range in use
BUILD_ID_COUNT = 65536
MAP_WAIT_S = 30.0


class NamespaceUnavailable(OSError):
    """This host cannot make the build's user namespace (not root, or the kernel refuses)."""


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")


@contextlib.contextmanager
def _namespace_scratch():
    """A temporary directory the namespace's root owns, under ``/tmp`` (world-traversable):
    the command's ``TMPDIR`` and ``HOME``. The caller's own ``TMPDIR`` may be a directory only
    the host's root may enter (``tempfile.mkdtemp`` makes them 0700), and ``HOME`` is
    ``/root``: the namespace's root is an unprivileged host id, which could write neither
    (mmdebstrap's ``tempdir() ... Permission denied``)."""
    scratch = tempfile.mkdtemp(prefix="crucible-userns-", dir="/tmp")
    try:
        os.chown(scratch, BUILD_ID_BASE, BUILD_ID_BASE)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_as_namespace_root(
    command: list[str],
    *,
    timeout_s: float,
    cwd: str | None = None,
    env: dict | None = None,
    read_stdout: Callable[[IO[bytes]], None] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``command`` as uid 0 of a fresh user namespace (see the module), in its own mount
    namespace and, through ``unshare --pid --fork``, its own pid namespace (everything it
    starts dies with it), with ``TMPDIR`` and ``HOME`` a fresh directory it owns (removed
    after; :func:`_namespace_scratch`).

    Args:
        read_stdout: called with the command's standard output as a binary stream, read as it
            comes (a tar the build writes); None: kept, as text, in the result.

    Returns:
        the completed process (``stdout`` and ``stderr`` as text; ``stdout`` empty with
        ``read_stdout``).

    Raises:
        NamespaceUnavailable: this process is not root, or the namespace could not be made.
        subprocess.TimeoutExpired: it ran past ``timeout_s`` (its process group is killed).
        Exception: what ``read_stdout`` raised (the command is killed first).
    """
    if os.geteuid() != 0:
        raise NamespaceUnavailable(
            "a build in a user namespace is started by root (it maps unprivileged host ids)"
        )
    with _namespace_scratch() as scratch:
        own_env = {**(os.environ if env is None else env), "TMPDIR": scratch, "HOME": scratch}
        return _run(command, timeout_s=timeout_s, cwd=cwd, env=own_env, read_stdout=read_stdout)


def _run(command, *, timeout_s, cwd, env, read_stdout) -> subprocess.CompletedProcess:
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    failure: list[str] = []

    def child_setup() -> None:  # after fork, before exec (subprocess's preexec_fn)
        os.close(ready_r)
        os.close(go_w)
        try:
            _unshare(CLONE_NEWUSER | CLONE_NEWNS)
        except OSError:
            os._exit(125)
        os.write(ready_w, str(os.getpid()).encode())  # the parent writes this pid's maps
        os.close(ready_w)
        if os.read(go_r, 1) != b"g":  # it could not
            os._exit(125)
        os.setresgid(0, 0, 0)
        os.setgroups([])
        os.setresuid(0, 0, 0)

    def write_maps() -> None:
        # Popen returns only once the child has exec'd, and the child waits for its maps
        # before that: a thread answers it meanwhile.
        try:
            said = os.read(ready_r, 32)
            if not said:
                failure.append("the build process could not enter a user namespace")
                return
            mapping = f"0 {BUILD_ID_BASE} {BUILD_ID_COUNT}\n"
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{int(said)}/{name}", "w") as handle:
                    handle.write(mapping)
            os.write(go_w, b"g")
        except (OSError, ValueError) as exc:
            failure.append(f"writing the namespace's id maps: {exc}")
        finally:
            os.close(go_w)

    thread = threading.Thread(target=write_maps, name="userns-maps", daemon=True)
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *command]
    thread.start()
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            preexec_fn=child_setup,  # unshare must happen in the child itself
            start_new_session=True,
            pass_fds=(ready_w, go_r),
        )
    finally:
        os.close(ready_w)
        os.close(go_r)
        thread.join(MAP_WAIT_S)
        os.close(ready_r)
    if failure:
        process.kill()
        process.communicate()
        raise NamespaceUnavailable(failure[0])
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)

    timer = threading.Timer(timeout_s, expire)
    timer.start()
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(process.stderr.read()), daemon=True)
    drain.start()
    stdout = b""
    try:
        if read_stdout is None:
            stdout = process.stdout.read()
        else:
            read_stdout(process.stdout)
            process.stdout.read()  # what the reader left
    except BaseException:
        expire()
        raise
    finally:
        process.wait()
        timer.cancel()
        drain.join()
        process.stdout.close()
        process.stderr.close()
    out = stdout.decode("utf-8", "replace")
    err = b"".join(errors).decode("utf-8", "replace")
    if expired.is_set():
        raise subprocess.TimeoutExpired(argv, timeout_s, output=out, stderr=err)
    if process.returncode == 125 and not out and not err:
        raise NamespaceUnavailable("the kernel refused the build's user namespace (unshare)")
    return subprocess.CompletedProcess(argv, process.returncode, out, err)
