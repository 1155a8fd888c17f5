"""A package index served from a thread of the test (PEP 503 HTML and PEP 691 JSON), and
source distributions whose build code would touch a marker file on the host if it ever ran."""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import canonicalize_name

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def tar_gz(path: Path, files: dict[str, bytes]) -> Path:
    """A ``.tar.gz`` at ``path`` holding ``files`` (names as given)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(content))
    return path


CALC = b"def clamp(value, low, high):\n    return max(low, min(value, high))\n"
CALC_TESTS = b"from calc import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"


def hostile_sdist(
    directory: Path, name: str, version: str, markers: Path, *, extra: str = ""
) -> Path:
    """An sdist of ``name==version`` whose ``setup.py`` and in-tree PEP 517 backend each touch a
    file under ``markers`` when run (building it, or preparing its metadata, runs them), and
    whose wheel, if built, holds the ``calc`` module. It carries ``calc.py`` and a test module,
    so the repository-bug generator can read it. ``extra``: more code its backend runs when it
    is imported (after the probes)."""
    top = f"{name}-{version}"
    touch = (
        "import os, pathlib\n"
        "try:\n"
        f"    os.makedirs({str(markers)!r}, exist_ok=True)\n"
        f"    pathlib.Path({str(markers)!r}, '@WHAT@').touch()\n"
        "except OSError:\n"
        "    pass\n"
    )
    backend = (
        touch.replace("@WHAT@", "backend-import")
        + _PROBES
        + extra
        + _WHEEL_BACKEND.replace("@NAME@", name).replace("@VERSION@", version)
    )
    files = {
        f"{top}/PKG-INFO": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nLicense: MIT\n"
        ).encode(),
        f"{top}/pyproject.toml": (
            b'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        ),
        f"{top}/backend.py": backend.encode(),
        f"{top}/setup.py": touch.replace("@WHAT@", "setup-py").encode(),
        f"{top}/calc.py": CALC,
        f"{top}/tests/test_calc.py": CALC_TESTS,
    }
    return tar_gz(directory / f"{top}.tar.gz", files)


# What the backend tries when it is imported, each attempt's outcome kept in PROBES and shipped in
# the wheel as probe.json (a sandboxed build shows there what it could and could not do).
_PROBES = r"""
import json, socket, subprocess

PROBES = {}


def _probe(name, action):
    try:
        PROBES[name] = "succeeded: " + str(action())[:200]
    except Exception as exc:  # noqa: BLE001 - every failure is the answer
        PROBES[name] = "failed: " + type(exc).__name__


def _connect(address):
    with socket.create_connection(address, timeout=3):
        return "connected"


def _proxy(target):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect("/crucible/registry/proxy.sock")
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        answer = sock.recv(200).decode("latin-1").split("\r\n")[0]
        if " 200 " in answer:
            return answer
        raise PermissionError(answer)


_probe("read /etc/shadow", lambda: open("/etc/shadow").read(10))
_probe("write /usr", lambda: open("/usr/crucible-probe", "w").write("x"))
_probe("write /work", lambda: open("/work/crucible-probe", "w").write("x"))
_probe("list /root", lambda: __import__("os").listdir("/root"))
_probe("host redis 127.0.0.1:6379", lambda: _connect(("127.0.0.1", 6379)))
_probe("host postgres 127.0.0.1:5432", lambda: _connect(("127.0.0.1", 5432)))
_probe("internet 1.1.1.1:443", lambda: _connect(("1.1.1.1", 443)))
_probe("metadata 169.254.169.254:80", lambda: _connect(("169.254.169.254", 80)))
_probe("proxy to example.com:443", lambda: _proxy("example.com:443"))
_probe("proxy to 169.254.169.254:80", lambda: _proxy("169.254.169.254:80"))
_probe("run as root", lambda: "uid 0" if __import__("os").getuid() == 0 else 1 / 0)
_probe("setuid", lambda: __import__("os").setuid(0))
_probe("sudo", lambda: subprocess.run(["sudo", "-n", "true"], check=True, capture_output=True))
"""


# A PEP 517 backend that writes a wheel of calc.py by hand (no setuptools needed, so a build needs
# no network): what an honest sdist's build produces, used to show a sandboxed build works.
_WHEEL_BACKEND = """
import base64, hashlib, os, zipfile

NAME, VERSION = "@NAME@", "@VERSION@"
DIST = NAME.replace("-", "_")


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(directory, config_settings=None):
    info = os.path.join(directory, f"{DIST}-{VERSION}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as handle:
        handle.write(f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n")
    return os.path.basename(info)


def build_wheel(directory, config_settings=None, metadata_directory=None):
    name = f"{DIST}-{VERSION}-py3-none-any.whl"
    info = f"{DIST}-{VERSION}.dist-info"
    metadata = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
    wheel = "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    members = {
        "calc.py": open("calc.py", "rb").read(),
        "probe.json": json.dumps(PROBES, indent=1).encode(),
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": wheel.encode(),
    }
    lines = [_record_line(p, d) for p, d in members.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, data in members.items():
            wheel.writestr(path, data)
        wheel.writestr(f"{info}/RECORD", "\\n".join(lines) + "\\n")
    return name
"""


def write_index(root: Path, distributions: list[Path]) -> Path:
    """A PEP 503 simple index under ``root/simple`` listing ``distributions`` (copied into
    ``root/files``), each link with its ``#sha256=``; returns ``root/simple``."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[tuple[str, str]]] = {}
    for dist in distributions:
        data = dist.read_bytes()
        (files / dist.name).write_bytes(data)
        project = canonicalize_name(dist.name.split("-")[0])
        projects.setdefault(project, []).append((dist.name, hashlib.sha256(data).hexdigest()))
    for project, entries in projects.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="../../files/{html.escape(n)}#sha256={h}">{html.escape(n)}</a>\n'
            for n, h in entries
        )
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
        (page / "index.json").write_text(
            json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "name": project,
                    "files": [
                        {"filename": n, "url": f"../../files/{n}", "hashes": {"sha256": h}}
                        for n, h in entries
                    ],
                }
            )
        )
    return root / "simple"


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def send_head(self):
        # PEP 691: a client asking for JSON gets the project's JSON page.
        if JSON_TYPE in self.headers.get("Accept", "") and self.path.endswith("/"):
            path = Path(self.translate_path(self.path)) / "index.json"
            if path.is_file():
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", JSON_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                return io.BytesIO(data)
        return super().send_head()


@contextlib.contextmanager
def hostile_index(
    root: Path, patch, packages: dict[str, str] | None = None
) -> Iterator[tuple[str, Path]]:
    """A package index under ``root`` holding hostile sdists (``{name: extra backend code}``,
    default ``evilcalc`` alone; each at version 1.0), served from a thread; pip here (and in a
    build sandbox, which reads the same configuration) pointed at it and nothing else through
    ``patch`` (a ``MonkeyPatch``). Yields ``(the index's simple URL, the markers directory)``."""
    markers = root / "markers"
    dists = root / "dists"
    dists.mkdir(parents=True)
    for name, extra in (packages or {"evilcalc": ""}).items():
        hostile_sdist(dists, name, "1.0", markers, extra=extra)
    write_index(root / "index", list(dists.iterdir()))
    with serve(root / "index") as url:
        patch.setenv("PIP_INDEX_URL", f"{url}/simple/")
        for variable in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT"):
            patch.setenv(variable, "")
        yield f"{url}/simple/", markers


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` over HTTP on 127.0.0.1 from a thread; yields the base URL."""
    handler = lambda *a, **k: _Handler(*a, directory=str(root), **k)  # noqa: E731
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
