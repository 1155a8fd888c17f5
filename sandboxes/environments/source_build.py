"""Building an environment's packages from source distributions, inside a sandbox.

An sdist's build (its PEP 517 backend, ``setup.py``) is the project's own code. Crucible installs
wheels only (``--only-binary=:all:``, nothing of a package runs), unless an environment allows
source builds (``source_builds``); then the whole ``pip install`` runs in a sandbox with the
isolation graded code gets (``harness/zygote.py``: user, mount, pid, ipc, uts and network
namespaces, a read-only root, the sandbox user without capabilities, ``no_new_privs``, the
seccomp filter, a cgroup capping memory and processes, rlimits, a size-capped ``/tmp``) and
nothing of the host's filesystem writable. The build's only way out is its output: a tar on a
pipe, read here with every bound held (:mod:`core.archives`: names checked, no link,
sizes capped) into the store's build directory.

Network: the sandbox's namespace holds only ``lo``. When the package index pip is configured
with is remote, a proxy here (:class:`RegistryProxy`, on a Unix socket bound into the sandbox)
lets through connections to the index's own hosts (and ``files.pythonhosted.org`` for PyPI, plus
``CRUCIBLE_BUILD_REGISTRY_HOSTS``) and refuses every other: a build reaches the package registry
and nothing else. Local indexes (``file://``, find-links directories) are bound read-only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from core.archives import ArchiveLimits, ArchiveRefused, read_archive
from sandboxes.environments.store import EnvironmentBuildError
from sandboxes.interpreters import python_interpreter
from sandboxes.process import Limits
from sandboxes.resident import SandboxSetupFailed, Tree, Zygote, ZygoteDied

HARNESS = Path(__file__).resolve().parent.parent / "harness" / "source_build.py"
PIP_INSIDE = "/crucible/pip"
REGISTRY_INSIDE = "/crucible/registry"
INDEX_INSIDE = "/crucible/index"
DEFAULT_INDEX = "https://pypi.org/simple"
PYPI_FILES = "files.pythonhosted.org"
LOG_CAP_BYTES = 256 * 1024
OUTPUT_LIMITS = ArchiveLimits(
    members=200_000, file_bytes=1024**3, total_bytes=3 * 1024**3, ratio=float("inf")
)
BUILD_LIMITS = Limits(
    wall_timeout_s=900.0,
    cpu_s=900,
    memory_bytes=4 * 1024**3,
    file_size_bytes=3 * 1024**3,
    processes=256,
    output_cap_bytes=LOG_CAP_BYTES,
)
TMP_INODES = 400_000
PRIORITY = {":env:": 3, "site": 2, "user": 1, "global": 0}


@dataclass
class IndexAccess:
    """How the sandboxed pip reaches the package index: its options (paths rewritten to where
    they are bound inside), the host directories bound read-only (host -> inside), and the
    ``(host, port)`` pairs its proxy lets through."""

    options: list[str] = field(default_factory=list)
    binds: dict[str, str] = field(default_factory=dict)
    hosts: set[tuple[str, int]] = field(default_factory=set)


def _pip_config() -> dict[str, str]:
    """pip's effective configuration here (``pip config list``: files and ``PIP_*``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found: dict[str, tuple[int, str]] = {}
    for line in done.stdout.splitlines():
        matched = re.match(r"^([^.]+)\.([\w-]+)='(.*)'$", line.strip())
        if matched:
            scope, key, value = matched.groups()
            rank = PRIORITY.get(scope, 0)
            if key not in found or rank >= found[key][0]:
                found[key] = (rank, value)
    return {key: value for key, (_rank, value) in found.items()}


def index_access(extra_hosts: list[str] = ()) -> IndexAccess:
    """The package index pip is configured with, as the sandbox reaches it (see the module)."""
    config = _pip_config()
    access = IndexAccess()

    def bind(directory: str) -> str:
        inside = access.binds.setdefault(directory, f"{INDEX_INSIDE}/{len(access.binds)}")
        return inside

    def location(url: str) -> str:
        parsed = urlparse(url)
        if parsed.scheme in ("http", "https"):
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            access.hosts.add(((parsed.hostname or "").lower(), port))
            if parsed.hostname == "pypi.org":
                access.hosts.add((PYPI_FILES, 443))
            return url
        path = unquote(parsed.path) if parsed.scheme == "file" else url
        path = os.path.realpath(path)
        # An index's pages link to its files by relative URLs (../../files/...): the index's
        # parent directory is bound, and the URL rewritten to the same place inside.
        parent = os.path.dirname(path) if parsed.scheme == "file" else path
        inside = bind(parent) + path[len(parent) :]
        return f"file://{inside}" if parsed.scheme == "file" else inside

    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        access.options.append("--no-index")
    else:
        access.options += ["--index-url", location(config.get("index-url") or DEFAULT_INDEX)]
        for url in config.get("extra-index-url", "").split():
            access.options += ["--extra-index-url", location(url)]
    for place in config.get("find-links", "").split():
        access.options += ["--find-links", location(place)]
    for host in extra_hosts:
        name, _, port = host.partition(":")
        access.hosts.add((name.lower(), int(port or 443)))
    for key in ("cert", "constraint"):
        value = config.get(key, "")
        if value and Path(value).is_file():
            directory = os.path.dirname(os.path.realpath(value))
            inside = (
                value if directory.startswith("/etc/") else bind(directory) + "/" + Path(value).name
            )
            access.options += [f"--{key}", inside]
    return access


class RegistryProxy:
    """An HTTP proxy on a Unix socket that connects only to ``hosts`` (``(host, port)``):
    ``CONNECT host:port`` (https) or an absolute-form request (plain http, rewritten to
    origin-form and sent with ``Connection: close``). Anything else is answered 403."""

    HEAD_CAP = 64 * 1024

    def __init__(self, directory: Path, hosts: set[tuple[str, int]]) -> None:
        self.hosts = {(h.lower(), p) for h, p in hosts}
        self.path = directory / "proxy.sock"
        self.refused: list[str] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        os.chmod(directory, 0o755)
        os.chmod(self.path, 0o666)  # the sandbox user connects to it
        self._server.listen(64)
        self._thread = threading.Thread(target=self._serve, daemon=True, name="registry-proxy")
        self._thread.start()

    def close(self) -> None:
        self._server.close()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk or len(head) > self.HEAD_CAP:
                    client.close()
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = (lines[0].split(" ") + ["", "", ""])[:3]
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                host, port = host.strip("[]").lower(), int(port or 443)
                upstream = self._connect(client, host, port)
                if upstream is None:
                    return
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                parsed = urlparse(target)
                if parsed.scheme != "http":
                    self._refuse(client, target)
                    return
                host, port = (parsed.hostname or "").lower(), parsed.port or 80
                upstream = self._connect(client, host, port)
                if upstream is None:
                    return
                path = parsed.path or "/"
                path += f"?{parsed.query}" if parsed.query else ""
                kept = [
                    line
                    for line in lines[1:]
                    if not line.lower().startswith(("proxy-", "connection:", "keep-alive:"))
                ]
                request = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
                upstream.sendall("\r\n".join(request).encode("latin-1") + rest)
                rest = b""
            if rest:
                upstream.sendall(rest)
            pumps = [
                threading.Thread(target=_pump, args=pair, daemon=True)
                for pair in ((client, upstream), (upstream, client))
            ]
            for pump in pumps:
                pump.start()
        except (OSError, ValueError):
            client.close()

    def _connect(self, client: socket.socket, host: str, port: int) -> socket.socket | None:
        if (host, port) not in self.hosts:
            self._refuse(client, f"{host}:{port}")
            return None
        try:
            return socket.create_connection((host, port), timeout=60)
        except OSError:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return None

    def _refuse(self, client: socket.socket, what: str) -> None:
        self.refused.append(what)
        body = f"{what} is not the package registry; a sandboxed build reaches only that\n"
        client.sendall(
            f"HTTP/1.1 403 Forbidden\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n{body}".encode("latin-1", "replace")
        )
        client.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _extra_hosts() -> list[str]:
    from django.conf import settings  # noqa: PLC0415 (settings only where a build runs)

    return list(getattr(settings, "BUILD_REGISTRY_HOSTS", []))


@contextlib.contextmanager
def _build_zygote(access: IndexAccess, registry: Path | None) -> Iterator[Zygote]:
    import pip  # noqa: PLC0415 (the pip that runs here is the one bound into the sandbox)

    mounts = [[os.path.dirname(pip.__file__), f"{PIP_INSIDE}/pip"]]  # pip alone
    mounts += [[host, inside] for host, inside in access.binds.items()]
    if registry is not None:
        mounts.append([str(registry), REGISTRY_INSIDE])
    interpreter = python_interpreter()
    zygote = Zygote(
        interpreter,
        "noop",
        {"noop": "def main(spec):\n    pass\n"},
        [],
        extra_config={"mounts": mounts},
    )
    zygote.start()
    try:
        yield zygote
    finally:
        zygote.stop()


def _run(zygote: Zygote, job: dict, output: Path, timeout_s: float) -> tuple[int | None, str]:
    """Run the build tree; its tar into ``output`` (capped); ``(exit code, log)``."""
    program = HARNESS.read_text(encoding="utf-8")
    pipes = {name: os.pipe() for name in ("stdout", "stderr", "results", "exit")}
    limits = dataclasses.replace(BUILD_LIMITS, wall_timeout_s=timeout_s, cpu_s=int(timeout_s))
    zygote.prepare_cgroup(limits)
    zygote.start_tree(
        role_fds=["results"],
        limits=limits,
        fds={name: write for name, (_read, write) in pipes.items()},
        exec_argv=[zygote.interpreter, "-I", "-S", "-c", program, json.dumps(job)],
        loopback=bool(job.get("proxy_socket")),
        tmp_inodes=TMP_INODES,
    )
    readers = {name: read for name, (read, _write) in pipes.items()}
    try:
        pid = zygote.tree_pid()
    except ZygoteDied:  # SandboxSetupFailed too: nothing ran; the caller says so
        for fd in readers.values():
            os.close(fd)
        raise
    tree = Tree(zygote, pid, readers, limits)
    log = bytearray()
    exit_report = bytearray()
    written = 0
    killed = ""
    deadline = time.monotonic() + timeout_s
    selector = selectors.DefaultSelector()
    for name, fd in tree.pipes.items():
        selector.register(fd, selectors.EVENT_READ, name)
    with open(output, "wb") as tar:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not killed:
                killed = f"the build took more than {timeout_s:.0f} s and was stopped"
                _kill(tree)
            for key, _mask in selector.select(timeout=max(remaining, 0.5) if not killed else 5):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    continue
                if key.data == "results":
                    written += len(chunk)
                    if written > OUTPUT_LIMITS.total_bytes + 64 * 1024**2 and not killed:
                        killed = f"the build's output is over {OUTPUT_LIMITS.total_bytes} bytes"
                        _kill(tree)
                    elif not killed:
                        tar.write(chunk)
                elif key.data == "exit":
                    exit_report += chunk
                else:
                    log += chunk
                    del log[: max(0, len(log) - LOG_CAP_BYTES)]
            if killed and time.monotonic() > deadline + 30:
                break
    for key in list(selector.get_map().values()):  # given up on: closed all the same
        os.close(key.fd)
    selector.close()
    text = log.decode("utf-8", "replace")
    if killed:
        raise EnvironmentBuildError(
            f"sandboxed build: {killed}", kind="timeout" if "took" in killed else "failed", log=text
        )
    try:
        status = json.loads(bytes(exit_report))["status"]
        return os.waitstatus_to_exitcode(int(status)), text
    except (ValueError, KeyError, TypeError):
        return None, text


def _kill(tree: Tree) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(tree.pid, signal.SIGKILL)
    tree.zygote.kill_trees()


def _unpack(output: Path, target: Path) -> None:
    """The build's tar into ``target`` (the layer's ``site-packages``, and ``report.json`` beside
    it): directories and regular files only, each name checked, written without following
    anything (nothing here is a link)."""
    target.mkdir(parents=True, exist_ok=True)
    report = target.parent.parent / "pip-report.json"
    prefix = "out/site-packages/"
    try:
        for member in read_archive(
            output, label="the sandboxed build's output", limits=OUTPUT_LIMITS
        ):
            if member.name == "out/report.json" and member.kind == "file":
                report.write_bytes(member.data)
                continue
            if member.name in ("out", "out/site-packages"):
                continue
            if not member.name.startswith(prefix):
                raise EnvironmentBuildError(
                    f"the sandboxed build wrote {member.name!r} outside its output"
                )
            relative = member.name[len(prefix) :]
            path = target / relative
            if member.kind == "dir":
                path.mkdir(parents=True, exist_ok=True)
            elif member.kind == "file":
                path.parent.mkdir(parents=True, exist_ok=True)
                mode = 0o755 if member.executable else 0o644
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(member.data)
            else:
                raise EnvironmentBuildError(
                    f"the sandboxed build produced {relative!r}, a {member.kind}: an installed "
                    "package holds regular files only"
                )
    except ArchiveRefused as exc:
        raise EnvironmentBuildError(f"the sandboxed build's output was refused: {exc}") from None


def install_in_sandbox(
    requirements: list[str], options: list[str], tree: Path, *, timeout_s: float
) -> tuple[int | None, str]:
    """``pip install --target`` of ``requirements`` with ``options`` in a sandbox (see the
    module); on success the installed files land in ``tree/site-packages`` and pip's report in
    ``tree/../pip-report.json``.

    Returns:
        ``(pip's exit status, the build's log)``: a failed pip is the caller's to classify.

    Raises:
        EnvironmentBuildError: the build ran out of time or wrote too much, its output broke a
            bound, or the sandbox could not start (``runtime_unavailable``).
    """
    access = index_access(_extra_hosts())
    with tempfile.TemporaryDirectory(prefix="crucible-build-") as scratch:
        scratch_path = Path(scratch)
        registry = None
        proxy = None
        if access.hosts:
            registry = scratch_path / "registry"
            registry.mkdir()
            proxy = RegistryProxy(registry, access.hosts)
        job = {
            "requirements": requirements,
            "options": [*options, *access.options],
            "proxy_socket": f"{REGISTRY_INSIDE}/proxy.sock" if proxy else "",
        }
        output = tree.parent / "build-output.tar"
        try:
            with _build_zygote(access, registry) as zygote:
                code, log = _run(zygote, job, output, timeout_s)
        except (SandboxSetupFailed, ZygoteDied) as exc:
            raise EnvironmentBuildError(
                f"the sandbox for the source build could not start: {exc}",
                kind="runtime_unavailable",
            ) from None
        finally:
            if proxy is not None:
                proxy.close()
        refused = ""
        if proxy is not None and proxy.refused:
            refused = f"(the registry proxy refused: {', '.join(sorted(set(proxy.refused)))})\n"
        log = (
            f"$ pip install in a build sandbox (network: the package registry only)\n{refused}{log}"
        )
        try:
            if code == 0:
                _unpack(output, tree / "site-packages")
        finally:
            output.unlink(missing_ok=True)
        return code, log
