"""Inside a sandbox: install an environment's pins with pip, building sdists, then hand the result
to the host as a tar on fd 3 (standard library only; run as ``python -I -S -c <this> JOB``).

The sandbox is an execution tree of a zygote (``zygote.py``): its own user, mount, pid, ipc, uts
and network namespaces, a read-only root, the sandbox user, no capabilities, ``no_new_privs``,
the seccomp filter, a cgroup, a size-capped ``/tmp``. pip itself is bound read-only at
``/crucible/pip``; local package indexes at ``/crucible/index/N``. Its network namespace holds
only ``lo``: when the job names a proxy socket (``/crucible/registry/proxy.sock``, served by the
host, which lets through only the package registry's hosts), a thread here listens on
``127.0.0.1`` and forwards each connection to it, and pip runs with ``--proxy`` pointing there.
Whatever the build runs can reach nothing else.

JOB (JSON): ``{"requirements": [lines], "options": [pip options], "proxy_socket": path or ""}``.
Output: pip's output on stdout/stderr; on success, a tar (uncompressed) of ``out/site-packages/``
and ``out/report.json`` (pip's installation report) on fd 3; the exit status is pip's.
"""

import json
import os
import socket
import subprocess
import sys
import tarfile
import threading

OUT = "/tmp/build/out"
PIP_LIBRARY = "/crucible/pip"
RUN_PIP = (
    f"import sys; sys.path.insert(0, {PIP_LIBRARY!r}); "
    "from pip._internal.cli.main import main; sys.exit(main())"
)


def _pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _forward(listener, proxy_socket):
    """Each connection to ``listener`` relayed to the host's registry proxy."""
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(proxy_socket)
        except OSError:
            client.close()
            upstream.close()
            continue
        for pair in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=pair, daemon=True).start()


def main():
    job = json.loads(sys.argv[1])
    os.makedirs(OUT, exist_ok=True)
    requirements = "/tmp/build/requirements.txt"
    with open(requirements, "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in job["requirements"]))
    argv = [sys.executable, "-c", RUN_PIP, "install", "--isolated", "--no-cache-dir"]
    argv += ["--disable-pip-version-check", "--no-input", "--no-compile", "--progress-bar=off"]
    argv += ["--no-warn-script-location", "--no-warn-conflicts"]
    argv += ["--target", f"{OUT}/site-packages", "--report", f"{OUT}/report.json"]
    argv += ["-r", requirements, *job["options"]]
    if job.get("proxy_socket"):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        threading.Thread(target=_forward, args=(listener, job["proxy_socket"]), daemon=True).start()
        argv += ["--proxy", f"http://127.0.0.1:{port}"]
    env = dict(os.environ, PIP_NO_INPUT="1", HOME="/tmp/build")
    code = subprocess.call(argv, env=env, stdin=subprocess.DEVNULL)
    sys.stdout.flush()
    if code != 0:
        sys.exit(code)
    with os.fdopen(3, "wb") as results, tarfile.open(fileobj=results, mode="w|") as tar:
        tar.add(OUT, arcname="out")


if __name__ == "__main__":
    main()
