"""Build an environment's packages layer: pip for Python, npm for Node.js.

Python: ``pip install --target tree/site-packages`` with the exact pins (``--require-hashes``
when the spec gives hashes), run by the worker's own pip. For a runtime other than the host's
Python (the Debian root's), pip installs for that interpreter by tags (``--python-version``,
``--abi``, ``--platform manylinux..._x86_64``, wheels only), so nothing of the target
interpreter has to run during the build. What was resolved (the pins and their dependencies)
is read back with ``pip list --path``.

Node.js: the pins go into a ``package.json``; ``npm install --package-lock-only`` resolves the
lock file once, then ``npm ci`` installs exactly that lock (with its integrity hashes) into
``tree/node_modules``, lifecycle scripts off.

Failures are classified from the tool's own output into :class:`EnvironmentBuildError` kinds
(a missing package, a conflict, a bad hash, out of disk, a timeout), naming the package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from sandboxes.environments.mount import SITE_PACKAGES
from sandboxes.environments.spec import HOST_PYTHON, EnvironmentSpec
from sandboxes.environments.store import EnvironmentBuildError

BUILD_TIMEOUT_S = 900.0
LOG_TAIL_CHARS = 20000
# glibc of the Debian root (trixie: 2.41): manylinux wheels up to that are loadable there.
MANYLINUX_MAX_MINOR = 41

MISSING = (
    re.compile(r"No matching distribution found for ([^\s]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s]+)"),
)
CONFLICT = re.compile(r"Cannot install (.+?) because these package versions have conflicting")
CONFLICT_CAUSE = re.compile(r"The conflict is caused by:\n((?:\s+.+\n)+)")


def _tail(text: str) -> str:
    return text[-LOG_TAIL_CHARS:]


def _run(command: list[str], *, timeout_s: float, what: str, cwd: Path | None = None) -> str:
    """Run a build step; its combined output, or :class:`EnvironmentBuildError`."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        raise EnvironmentBuildError(
            f"{what} took more than {timeout_s:.0f} s and was stopped; raise the build's time "
            "limit or install fewer packages",
            kind="timeout",
            log=_tail(out),
        ) from None
    except FileNotFoundError as exc:
        raise EnvironmentBuildError(
            f"{what}: {exc.filename} is not installed on this machine", kind="runtime_unavailable"
        ) from None
    log = f"$ {' '.join(command)}\n{done.stdout}{done.stderr}"
    if done.returncode != 0:
        raise _classify(what, done.stdout + done.stderr, log)
    return log


def _classify(what: str, output: str, log: str) -> EnvironmentBuildError:
    """The error a failed pip or npm run means, with the package it names."""
    if "No space left on device" in output or "ENOSPC" in output:
        return EnvironmentBuildError(
            f"{what} ran out of disk space; free space under the environment store",
            kind="out_of_disk",
            log=_tail(log),
        )
    for pattern in MISSING:
        found = pattern.search(output)
        if found:
            package = found.group(1).rstrip(")")
            return EnvironmentBuildError(
                f"{what}: package {package} has no release (or no wheel for this runtime) on the "
                "package index; check the name and version on pypi.org and fix the pin",
                kind="missing_package",
                package=package,
                log=_tail(log),
            )
    if "ResolutionImpossible" in output or "conflicting dependencies" in output:
        found = CONFLICT.search(output)
        causes = CONFLICT_CAUSE.search(output)
        package = found.group(1) if found else ""
        detail = " ".join(causes.group(1).split()) if causes else ""
        return EnvironmentBuildError(
            f"{what}: the pins conflict ({detail or package}); pick versions whose "
            "dependencies agree",
            kind="conflict",
            package=package,
            log=_tail(log),
        )
    if "DO NOT MATCH THE HASHES" in output or "Hashes are required" in output:
        return EnvironmentBuildError(
            f"{what}: a downloaded file does not match its --hash (or a dependency has no "
            "hash); correct the hashes, or pin and hash every dependency",
            kind="bad_hash",
            log=_tail(log),
        )
    if "E404" in output or "404 Not Found" in output:
        found = re.search(r"The requested resource '([^']+)' could not be found", output)
        found = found or re.search(r"404 Not Found - GET \S+/(\S+?)(?: - |\s|$)", output)
        package = found.group(1) if found else ""
        return EnvironmentBuildError(
            f"{what}: package {package or '(see the log)'} does not exist on the npm registry; "
            "check the name and version",
            kind="missing_package",
            package=package,
            log=_tail(log),
        )
    if "ETARGET" in output:
        found = re.search(r"No matching version found for (\S+)", output)
        package = found.group(1).rstrip(".") if found else ""
        return EnvironmentBuildError(
            f"{what}: {package or 'a package'} has no such version on the npm registry",
            kind="missing_package",
            package=package,
            log=_tail(log),
        )
    last = [line for line in output.strip().splitlines() if line.strip()][-3:]
    return EnvironmentBuildError(
        f"{what} failed: {' / '.join(last) or 'no output'}", kind="failed", log=_tail(log)
    )


def target_tags(runtime: str) -> list[str]:
    """pip's options that install wheels for ``runtime`` when it is not the host's Python."""
    if runtime == HOST_PYTHON:
        return []
    minor = runtime.removeprefix("python3.")
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(MANYLINUX_MAX_MINOR, 16, -1)]
    options = ["--only-binary=:all:", "--python-version", f"3.{minor}"]
    options += ["--implementation", "cp", "--abi", f"cp3{minor}", "--abi", "abi3", "--abi", "none"]
    for platform in [*platforms, "manylinux2014_x86_64", "linux_x86_64", "any"]:
        options += ["--platform", platform]
    return options


def build_python(
    spec: EnvironmentSpec,
    tree: Path,
    *,
    lock: list[dict] | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> dict:
    """Install ``spec``'s pins into ``tree/site-packages``.

    Args:
        lock: a previous build's ``resolved`` list (every package with its version and the
            sha256 of its file): installed exactly, ``--no-deps --require-hashes``, so an image
            built later gets the same files though the index has newer dependencies by then.

    Returns:
        ``{"resolved": [{"name", "version", "sha256"}...], "log": str}``: what pip's
        installation report says it installed (the pins and their dependencies).

    Raises:
        EnvironmentBuildError: pip failed (kind and package say why).
    """
    target = tree / SITE_PACKAGES
    requirements = tree.parent / "requirements.txt"
    report = tree.parent / "pip-report.json"
    if lock:
        lines = [f"{p['name']}=={p['version']} --hash=sha256:{p['sha256']}" for p in lock]
    else:
        lines = [p.requirement_line() for p in spec.python_pins]
    requirements.write_text("".join(line + "\n" for line in lines))
    command = [sys.executable, "-m", "pip", "install", "--no-compile", "--target", str(target)]
    # --no-warn-conflicts: pip's after-install check compares the target with the packages of
    # the interpreter running pip, which no sandbox sees (conflicts among the pins themselves
    # still fail the resolution).
    command += ["--no-warn-script-location", "--no-warn-conflicts"]
    command += ["--report", str(report), "-r", str(requirements)]
    if lock:
        command += ["--no-deps", "--require-hashes"]
    elif spec.require_hashes:
        command.append("--require-hashes")
    command += target_tags(spec.runtime)
    what = f"pip install for {spec.runtime}"
    log = _run(command, timeout_s=timeout_s, what=what)
    try:
        installed = json.loads(report.read_text())["install"]
        resolved = [
            {
                "name": item["metadata"]["name"],
                "version": item["metadata"]["version"],
                "sha256": item["download_info"]
                .get("archive_info", {})
                .get("hashes", {})
                .get("sha256", ""),
            }
            for item in installed
        ]
    except (OSError, ValueError, KeyError) as exc:
        raise EnvironmentBuildError(
            f"pip's installation report could not be read: {exc}", log=_tail(log)
        ) from exc
    # pip's own bookkeeping differs from build to build (the installer's paths; REQUESTED marks
    # what was named on the command line, which a lock names all of); nothing in a sandbox
    # reads it.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for name in ("RECORD", "direct_url.json", "REQUESTED"):
        for path in target.glob(f"*.dist-info/{name}"):
            path.unlink()
    return {"resolved": sorted(resolved, key=lambda r: r["name"].lower()), "log": _tail(log)}


def build_node(spec: EnvironmentSpec, tree: Path, *, timeout_s: float = BUILD_TIMEOUT_S) -> dict:
    """Install ``spec``'s npm pins into ``tree/node_modules`` through a lock file and ``npm ci``.

    Raises:
        EnvironmentBuildError: npm failed, or is not installed.
    """
    npm = shutil.which("npm")
    if npm is None:
        raise EnvironmentBuildError(
            "npm is not installed on this machine; install Node.js with npm to build Node packages",
            kind="runtime_unavailable",
        )
    dependencies = dict(pin.rsplit("@", 1) for pin in spec.npm_pins)
    manifest = {"name": "crucible-environment", "private": True, "dependencies": dependencies}
    (tree / "package.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    quiet = ["--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier"]
    log = _run(
        [npm, "install", "--package-lock-only", *quiet],
        timeout_s=timeout_s,
        what="npm install --package-lock-only",
        cwd=tree,
    )
    log += _run([npm, "ci", *quiet], timeout_s=timeout_s, what="npm ci", cwd=tree)
    lock = json.loads((tree / "package-lock.json").read_text())
    resolved = [
        {"name": path.removeprefix("node_modules/"), "version": info.get("version", "")}
        for path, info in sorted(lock.get("packages", {}).items())
        if path
    ]
    return {"resolved": resolved, "log": _tail(log)}
